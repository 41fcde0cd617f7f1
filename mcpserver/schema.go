package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/nomoshq/nomos/policy"
)

// Tool arguments are Go structs. Their JSON Schema is derived from the
// struct (github.com/google/jsonschema-go, the library mcp-go builds its
// own schemas with): a field's `jsonschema` tag is its description, a
// field without omitempty is required, and three more tags say what the
// handler does with it:
//
//	default:"50"   the value the handler uses when the field is absent
//	minimum:"1"    the smallest value accepted
//	maximum:"100"  the largest value accepted
//
// typed fills the defaults in before the handler runs, so the schema's
// default is the only place each one is written. Enumerated strings are
// named types listed in enums.

// healthArg filters by health. "attention" is anything neither healthy nor
// stopped on purpose.
type healthArg string

// entityTypeArg is the type of entity list_entities lists.
type entityTypeArg string

// metricTypeArg is the type of entity query_metrics ranks.
type metricTypeArg string

// aggregateArg is how query_metrics folds each entity's samples.
type aggregateArg string

// enums maps each enumerated argument type to its values.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[healthArg]():            {"healthy", "degraded", "unhealthy", "unknown", "stale", "stopped", "attention", "not_healthy", "all", "any"},
	reflect.TypeFor[entityTypeArg]():        {"host", "lxc", "vm", "service", "check"},
	reflect.TypeFor[metricTypeArg]():        {"host", "lxc", "vm", "service"},
	reflect.TypeFor[aggregateArg]():         {"latest", "avg", "max", "min"},
	reflect.TypeFor[policy.SystemctlVerb](): {string(policy.VerbEnable), string(policy.VerbDisable), string(policy.VerbReload), string(policy.VerbStart), string(policy.VerbStop), string(policy.VerbRestart)},
	reflect.TypeFor[policy.AptMode]():       {string(policy.AptAudit), string(policy.AptUpgrade)},
}

// schemaOptions are the options every schema is derived with.
func schemaOptions() *jsonschema.ForOptions {
	types := map[reflect.Type]*jsonschema.Schema{}
	for t, values := range enums {
		s := &jsonschema.Schema{Type: "string"}
		for _, v := range values {
			s.Enum = append(s.Enum, v)
		}
		types[t] = s
	}
	// Raw JSON in a result is an action's params: an object.
	types[reflect.TypeFor[json.RawMessage]()] = &jsonschema.Schema{Type: "object"}
	return &jsonschema.ForOptions{TypeSchemas: types}
}

// schemaFor derives the JSON Schema of a struct type, with its default,
// minimum and maximum tags applied.
func schemaFor(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, schemaOptions())
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	notNull(s)
	if err := applyTags(t, s); err != nil {
		return nil, err
	}
	return s, nil
}

// notNull drops "null" from the types of properties that may be null in
// Go (a pointer, a slice) but are never sent as null: left out, they take
// their default.
func notNull(s *jsonschema.Schema) {
	for _, p := range s.Properties {
		if len(p.Types) == 2 && slices.Contains(p.Types, "null") {
			p.Type = p.Types[slices.Index(p.Types, "null")^1]
			p.Types = nil
		}
	}
}

// applyTags copies the default, minimum and maximum tags of t's fields
// into their properties, each decoded as the field's own type so a tag
// that does not fit the field fails here, not in a client.
func applyTags(t reflect.Type, s *jsonschema.Schema) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		prop := s.Properties[name]
		if prop == nil {
			continue
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			raw, err := tagValue(f, d)
			if err != nil {
				return err
			}
			prop.Default = raw
		}
		for _, bound := range []struct {
			tag string
			set **float64
		}{{"minimum", &prop.Minimum}, {"maximum", &prop.Maximum}} {
			if v, ok := f.Tag.Lookup(bound.tag); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("%s.%s: %s tag %q: %w", t, f.Name, bound.tag, v, err)
				}
				*bound.set = &n
			}
		}
	}
	return nil
}

// tagValue is a default tag as JSON of the field's type: strings as they
// are written, everything else as JSON.
func tagValue(f reflect.StructField, v string) (json.RawMessage, error) {
	raw := json.RawMessage(v)
	if f.Type.Kind() == reflect.String {
		raw, _ = json.Marshal(v)
	}
	if err := json.Unmarshal(raw, reflect.New(f.Type).Interface()); err != nil {
		return nil, fmt.Errorf("%s: default tag %q does not fit %s: %w", f.Name, v, f.Type, err)
	}
	return raw, nil
}

// defaultsOf is the JSON object of T's defaults, which typed decodes
// before the call's arguments.
func defaultsOf(s *jsonschema.Schema) json.RawMessage {
	m := map[string]json.RawMessage{}
	for name, p := range s.Properties {
		if p.Default != nil {
			m[name] = p.Default
		}
	}
	raw, _ := json.Marshal(m)
	return raw
}

// inputSchema is the input schema of a tool whose arguments are T. The
// types are this package's, so an error is a bug the registry test finds.
func inputSchema[T any]() mcp.ToolOption {
	s, err := schemaFor(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	return rawInputSchema(mustJSON(s))
}

// rawInputSchema sets a tool's input schema to raw, clearing the one
// mcp.NewTool starts with, as mcp.WithInputSchema does.
func rawInputSchema(raw json.RawMessage) mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.InputSchema = mcp.ToolInputSchema{}
		t.RawInputSchema = raw
	}
}

// outputSchema is the output schema of a tool whose structuredContent is
// a T.
func outputSchema[T any]() mcp.ToolOption {
	s, err := schemaFor(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	return mcp.WithRawOutputSchema(mustJSON(s))
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// noArgs are the arguments of a tool that takes none.
type noArgs struct{}

// typed adapts a handler of T's arguments. It checks the call's arguments
// against T's schema, with errors that say what is wrong in words (an
// unknown argument, a missing one, a wrong type, a value outside its enum
// or bounds), fills in the defaults the schema declares, and decodes the
// rest into T.
func typed[T any](fn func(context.Context, T) (*mcp.CallToolResult, error)) server.ToolHandlerFunc {
	s, err := schemaFor(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	defaults := defaultsOf(s)
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var given map[string]any
		if req.Params.Arguments != nil || len(req.Params.RawArguments) > 0 {
			if err := req.BindArguments(&given); err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("the arguments of %s must be a JSON object", req.Params.Name)), nil
			}
		}
		if err := checkArgs(s, given); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("%s: %v", req.Params.Name, err)), nil
		}
		var args T
		if err := json.Unmarshal(defaults, &args); err != nil {
			return nil, fmt.Errorf("%s defaults: %w", req.Params.Name, err)
		}
		if len(given) > 0 {
			raw, err := json.Marshal(given)
			if err == nil {
				err = json.Unmarshal(raw, &args)
			}
			if err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("%s: the arguments do not fit: %v", req.Params.Name, err)), nil
			}
		}
		return fn(ctx, args)
	}
}

// checkArgs checks arguments against the flat object schema of a tool's
// argument struct. A property with no type (an `any` field) takes any
// value: its handler checks it.
func checkArgs(s *jsonschema.Schema, args map[string]any) error {
	var errs []string
	names := slices.Sorted(maps.Keys(s.Properties))
	for _, name := range slices.Sorted(maps.Keys(args)) {
		p, ok := s.Properties[name]
		if !ok {
			if len(names) == 0 {
				errs = append(errs, fmt.Sprintf("there is no argument %q: it takes none", name))
			} else {
				errs = append(errs, fmt.Sprintf("there is no argument %q (it takes %s)", name, strings.Join(names, ", ")))
			}
			continue
		}
		if err := checkValue(p, args[name]); err != nil {
			errs = append(errs, name+" "+err.Error())
		}
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			errs = append(errs, fmt.Sprintf("%s is required: %s", name, s.Properties[name].Description))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// checkValue checks one argument against its property's type, enum and
// bounds.
func checkValue(p *jsonschema.Schema, v any) error {
	switch p.Type {
	case "":
		return nil
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("must be a string, got %s", jsonText(v))
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, any(str)) {
			want := make([]string, len(p.Enum))
			for i, e := range p.Enum {
				want[i] = fmt.Sprint(e)
			}
			return fmt.Errorf("must be one of %s, got %q", strings.Join(want, ", "), oneLine(str, 40))
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) {
			return fmt.Errorf("must be a whole number, got %s", jsonText(v))
		}
		if p.Minimum != nil && n < *p.Minimum {
			return fmt.Errorf("must be at least %s, got %s", num(*p.Minimum), num(n))
		}
		if p.Maximum != nil && n > *p.Maximum {
			return fmt.Errorf("must be at most %s, got %s", num(*p.Maximum), num(n))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("must be true or false, got %s", jsonText(v))
		}
	}
	return nil
}

func jsonText(v any) string {
	raw, _ := json.Marshal(v)
	return oneLine(string(raw), 40)
}

// paramField describes one parameter of a catalogue action's params
// struct, by its JSON name: the policy package owns the struct, and says
// nothing of how to show it to a client.
type paramField struct {
	desc     string
	def      any
	min, max float64
}

// paramFields describe every parameter of every catalogue action
// (TestParamSchemasCoverTheCatalogue checks that none is missing, and that
// the bounds and defaults are what policy.ParseParams does).
var paramFields = map[string]paramField{
	"verb":         {desc: "the systemctl verb"},
	"unit":         {desc: "the systemd unit; required for an lxc target; for a service target, omit it or give the service's own unit"},
	"command":      {desc: "a shell script run by sh -c: inside the container for pct_exec (in a VM through its guest agent), on the Proxmox host for run"},
	"mode":         {desc: "audit refreshes the package lists and shows what would change (read-only); upgrade installs", def: policy.AptAudit},
	"vmid":         {desc: "the new container's id; omit for the next free one", min: policy.MinVMID, max: policy.MaxVMID},
	"hostname":     {desc: "the new container's hostname, a DNS label"},
	"cores":        {desc: "CPU cores", def: policy.DefaultCores, min: 1, max: 128},
	"memory":       {desc: "memory in MB", def: policy.DefaultMemory, min: 16, max: 1 << 20},
	"disk_gb":      {desc: "root disk size in GB", def: policy.DefaultDiskGB, min: 1, max: 65536},
	"ip":           {desc: `"dhcp" or a static IPv4 CIDR such as 192.168.8.50/24`, def: policy.DefaultIP},
	"gw":           {desc: "the IPv4 gateway, required with a static ip and refused with dhcp"},
	"storage":      {desc: "the Proxmox storage for the root disk", def: policy.DefaultStorage},
	"bridge":       {desc: "the bridge for eth0", def: policy.DefaultBridge},
	"template":     {desc: "a template volume id, or a family such as debian-13 or ubuntu-24.04; omit for the newest Debian template on the host"},
	"nameserver":   {desc: "an IPv4 resolver; omit for the host's or DHCP's"},
	"services":     {desc: "Debian packages to install, such as docker.io"},
	"post_install": {desc: "a shell script run inside the container after the packages, ending with a health check"},
	"privileged":   {desc: "make a privileged container", def: false},
	"nesting":      {desc: "the nesting feature, on by default for an unprivileged container as Proxmox's web interface sets it, off for a privileged one"},
	"onboot":       {desc: "start the container when its node boots", def: true},
	"timeout":      {desc: "seconds to wait for the guest to go, failing after it without forcing", def: policy.DefaultShutdownTimeout, min: 1, max: policy.MaxShutdownTimeout},
	"name":         {desc: "the snapshot name: 2 to 40 letters, digits, _ and -, starting with a letter; optional for pct_snapshot, which names one"},
	"vmstate":      {desc: "VMs only: also save the RAM, which needs the VM's memory size in storage", def: false},
	"purge":        {desc: "also remove the guest from backup jobs, replication and HA", def: false},
	"lines":        {desc: "how many of the newest journal lines", def: policy.DefaultLogLines, min: 1, max: policy.MaxLogLines},
}

// plannerFields are params fields Nomos fills in itself when it makes the
// plan; a client's value is replaced, so the schema does not offer them.
var plannerFields = map[string]bool{"description": true, "discard": true}

// paramsSchema is the JSON Schema of one catalogue action's params,
// derived from its policy struct.
func paramsSchema(a policy.Action) (*jsonschema.Schema, error) {
	t, ok := policy.ParamsType(a)
	if !ok {
		return nil, fmt.Errorf("action %s has no params type", a)
	}
	s, err := jsonschema.ForType(t, schemaOptions())
	if err != nil {
		return nil, fmt.Errorf("schema of %s params: %w", a, err)
	}
	s.Title = string(a) + " params"
	s.PropertyOrder = nil
	notNull(s)
	for name, p := range s.Properties {
		if plannerFields[name] {
			delete(s.Properties, name)
			continue
		}
		f, ok := paramFields[name]
		if !ok {
			return nil, fmt.Errorf("params of %s: field %s is not described in paramFields", a, name)
		}
		p.Description = f.desc
		if f.def != nil {
			p.Default = mustJSON(f.def)
		}
		if f.min != 0 || f.max != 0 {
			p.Minimum, p.Maximum = &f.min, &f.max
		}
	}
	s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return plannerFields[n] })
	return s, nil
}

// falseSchema admits nothing: as additionalProperties, no property but
// those listed.
func falseSchema() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

// noParams names the one params schema of every action that takes none.
const noParams = "no_params"

// requestInputSchema is request_execution's input schema. Each catalogue
// action's params schema is derived once, into $defs (one for all those
// that take none). The steps of a plan
// are oneOf keyed by the action (a const), each branch with a reference to
// that action's params; the params beside a single action are anyOf the
// same references. Neither combinator is at the top level, where the
// OpenAI API refuses them in a function's parameters.
func requestInputSchema() (json.RawMessage, error) {
	defs := map[string]*jsonschema.Schema{}
	params := &jsonschema.Schema{Type: "object",
		Description: "the action's params: the schema titled with the action's name; omit or {} for one that takes none"}
	step := &jsonschema.Schema{Type: "object",
		Description: "one step: an action, its target (default the request's target) and its params"}
	var names []any
	for _, spec := range policy.Catalogue() {
		ps, err := paramsSchema(spec.Action)
		if err != nil {
			return nil, err
		}
		def := string(spec.Action)
		if len(ps.Properties) == 0 {
			def, ps = noParams, &jsonschema.Schema{Type: "object", Title: "no params", Description: "none: {} or omitted", AdditionalProperties: falseSchema()}
		}
		ref := "#/$defs/" + def
		if defs[def] == nil {
			params.AnyOf = append(params.AnyOf, &jsonschema.Schema{Ref: ref})
		}
		defs[def] = ps
		names = append(names, string(spec.Action))
		step.OneOf = append(step.OneOf, &jsonschema.Schema{
			Type: "object",
			Properties: map[string]*jsonschema.Schema{
				"action": {Const: jsonschema.Ptr[any](string(spec.Action))},
				"target": {Type: "string"},
				"params": {Ref: ref},
			},
			Required:             []string{"action"},
			AdditionalProperties: falseSchema(),
		})
	}
	s := &jsonschema.Schema{
		Type: "object",
		Defs: defs,
		Properties: map[string]*jsonschema.Schema{
			"action": {Type: "string", Enum: names, Description: "the catalogue action, for a plan of one step"},
			"target": {Type: "string", Description: "the entity to act on: a slug (service:jellyfin, lxc:105, host:strong), a name, a vmid or a hostname; " +
				"with steps, the target of every step that names none"},
			"params": params,
			"steps": {Type: "array", MinItems: jsonschema.Ptr(1), MaxItems: jsonschema.Ptr(policy.MaxPlanSteps), Items: step,
				Description: "instead of action and params: a plan of several steps that run in order under one approval, " +
					"each only once the one before it succeeded; the rest are skipped after a failure"},
			"reason": {Type: "string", MinLength: jsonschema.Ptr(1), Description: "one sentence on why, for the audit log"},
		},
		Required:             []string{"reason"},
		AdditionalProperties: falseSchema(),
	}
	return json.Marshal(s)
}

// requestArgs are request_execution's arguments. Params and Steps stay raw:
// the gate parses them against the catalogue, with errors that name the
// field.
type requestArgs struct {
	Action string `json:"action,omitempty"`
	Target string `json:"target,omitempty"`
	Params any    `json:"params,omitempty"`
	Steps  any    `json:"steps,omitempty"`
	// Reason is required, as the declared schema says; the handler
	// says so in its own words.
	Reason string `json:"reason,omitempty"`
}
