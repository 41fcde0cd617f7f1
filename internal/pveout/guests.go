// Package pveout reads what a Proxmox VE node prints: the JSON of
// `pvesh get /cluster/resources` and `pvesh get /nodes/<node>/lxc` (and
// /qemu), the text of `pct config` and `qm config` (or a raw
// /etc/pve/lxc/<vmid>.conf), `pct
// listsnapshot` and `pvesm status`, and says from them whether `pct
// snapshot` can work. It is pure: the actuator's inventory and `nomos
// discover -from` feed it the same bytes, from SSH or from files.
//
// The readers are lenient where Proxmox versions differ (a number may come
// as a string, a flag as a number, a string or a JSON boolean) and never
// fail on one odd value: that value is left out and named in Odd. Only
// output that is not what the command prints at all is an error.
package pveout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Guest is one entry of /cluster/resources (a guest, a node, a storage)
// or of a node's /nodes/<node>/lxc listing.
type Guest struct {
	// Type is lxc, qemu, node, storage, ...; a node's listing of its
	// containers has no type, and its entries are lxc.
	Type string
	Node string
	// VMID is 0 when the entry has none a number could be read from.
	VMID   int
	Name   string
	Status string
	// Template is nil when the entry does not say.
	Template *bool
	Lock     string
	Tags     []string
	// HAState is the HA manager's state for an HA-managed guest
	// (started, stopped, ...; /cluster/resources only).
	HAState string
	// Odd names the fields whose value could not be read; the rest of
	// the entry stands.
	Odd []string
}

// ParseResources reads `pvesh get /cluster/resources --output-format
// json`. It fails only when the output is not a JSON array.
func ParseResources(out []byte) ([]Guest, error) {
	return parseGuests(out, "")
}

// ParseNodeGuests reads `pvesh get /nodes/<node>/lxc --output-format
// json`: the node's own, live view of its containers.
func ParseNodeGuests(out []byte) ([]Guest, error) {
	return parseGuests(out, "lxc")
}

// ParseNodeVMs reads `pvesh get /nodes/<node>/qemu --output-format json`:
// the node's own, live view of its VMs, whose entries have no type.
func ParseNodeVMs(out []byte) ([]Guest, error) {
	return parseGuests(out, "qemu")
}

func parseGuests(out []byte, defaultType string) ([]Guest, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(out), &raw); err != nil {
		return nil, fmt.Errorf("not a JSON array: %v", err)
	}
	guests := make([]Guest, 0, len(raw))
	for i, r := range raw {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(r, &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("entry %d is not a JSON object", i+1)
		}
		for k, v := range fields {
			if string(bytes.TrimSpace(v)) == "null" {
				delete(fields, k) // null is as good as absent
			}
		}
		g := Guest{Type: defaultType}
		str := func(key string, dst *string) {
			v, ok := fields[key]
			if !ok {
				return
			}
			s, ok := jsonString(v)
			if !ok {
				g.Odd = append(g.Odd, key)
				return
			}
			*dst = s
		}
		str("type", &g.Type)
		str("node", &g.Node)
		str("name", &g.Name)
		str("status", &g.Status)
		str("lock", &g.Lock)
		str("hastate", &g.HAState)
		if v, ok := fields["vmid"]; ok {
			if n, ok := jsonInt(v); ok {
				g.VMID = n
			} else {
				g.Odd = append(g.Odd, "vmid")
			}
		}
		if v, ok := fields["template"]; ok {
			if b, ok := jsonBool(v); ok {
				g.Template = &b
			} else {
				g.Odd = append(g.Odd, "template")
			}
		}
		var tags string
		str("tags", &tags)
		g.Tags = SplitTags(tags)
		if g.Type == "" {
			g.Type = defaultType
		}
		guests = append(guests, g)
	}
	return guests, nil
}

// jsonString reads a JSON string, or a number as its text; null is "".
func jsonString(v json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, true
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		return n.String(), true
	}
	return "", string(v) == "null"
}

// jsonInt reads a whole number, given as a JSON number or a string.
func jsonInt(v json.RawMessage) (int, bool) {
	s, ok := jsonString(v)
	if !ok || s == "" {
		return 0, ok && s == ""
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	return n, err == nil
}

// jsonBool reads a flag as Proxmox gives it: 0 or 1, as a number or a
// string, or a JSON boolean.
func jsonBool(v json.RawMessage) (bool, bool) {
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return b, true
	}
	s, ok := jsonString(v)
	if !ok {
		return false, false
	}
	return ParseBool(s)
}

// ParseBool reads a Proxmox boolean as its config and API accept it:
// 1, on, yes, true or 0, off, no, false.
func ParseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}

// SplitTags splits a tags value as Proxmox does: on ';', ',' and
// spaces, leaving out empty parts. It returns nil for no tags.
func SplitTags(s string) []string {
	out := strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' || r == '\t' })
	if len(out) == 0 {
		return nil
	}
	return out
}
