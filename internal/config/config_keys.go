package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"

	"github.com/nomoshq/nomos/internal/typo"
)

// configKeys is every key the config knows, from Config's koanf tags: the
// leaves, the maps whose keys are free (web.auth headers, say), and the
// lists of structs, whose items' keys are checked against the struct.
type configKeys struct {
	leaves map[string]reflect.Type
	maps   []string
	lists  map[string]reflect.Type
}

var knownConfigKeys = walkConfig(reflect.TypeFor[Config]())

var durationType = reflect.TypeFor[time.Duration]()

func walkConfig(t reflect.Type) configKeys {
	k := configKeys{leaves: map[string]reflect.Type{}, lists: map[string]reflect.Type{}}
	k.walk("", t)
	return k
}

func (k *configKeys) walk(prefix string, t reflect.Type) {
	for f := range t.Fields() {
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		key := prefix + tag
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			k.walk(key+".", ft)
		case ft.Kind() == reflect.Map:
			k.maps = append(k.maps, key)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			k.lists[key] = ft.Elem()
			k.leaves[key] = ft
		default:
			k.leaves[key] = ft
		}
	}
}

// unknown lists the keys of ko the config does not know, as full paths
// (an item of a list as list[i].key), sorted.
func (k configKeys) unknown(ko *koanf.Koanf) []string {
	var out []string
	for _, key := range ko.Keys() {
		if elem, ok := k.lists[key]; ok {
			items, _ := ko.Get(key).([]any)
			item := walkConfig(elem)
			for i, it := range items {
				m, _ := it.(map[string]any)
				for name := range m {
					if _, ok := item.leaves[name]; !ok && !slices.Contains(item.maps, name) {
						out = append(out, fmt.Sprintf("%s[%d].%s", key, i, name))
					}
				}
			}
			continue
		}
		if _, ok := k.leaves[key]; ok {
			continue
		}
		if slices.ContainsFunc(k.maps, func(m string) bool { return key == m || strings.HasPrefix(key, m+".") }) {
			continue
		}
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

// suggest is the known key nearest to key, or "" when none is near: a typo
// of a letter or two, or a key put under the wrong section.
func (k configKeys) suggest(key string) string {
	best, bestD := "", 0
	var candidates []string
	for known := range k.leaves {
		candidates = append(candidates, known)
	}
	slices.Sort(candidates)
	leaf := key[strings.LastIndexByte(key, '.')+1:]
	for _, known := range candidates {
		d := typo.Distance(key, known)
		if known[strings.LastIndexByte(known, '.')+1:] == leaf {
			d = min(d, 2) // the right name in the wrong section
		}
		if best == "" || d < bestD {
			best, bestD = known, d
		}
	}
	if bestD > max(2, len(key)/5) {
		return ""
	}
	return best
}

// checkKeys refuses a config source that sets keys the config does not
// know, naming each and the key it most likely meant, so a typo such as
// destructive_quorom is an error and not a setting silently left at its
// default. source says where the keys came from; envName, when set, turns
// a key into the variable that set it.
func checkKeys(ko *koanf.Koanf, source string, envName func(string) string) error {
	var errs []error
	for _, key := range knownConfigKeys.unknown(ko) {
		name := key
		if envName != nil {
			name = envName(key) + " (" + key + ")"
		}
		msg := fmt.Sprintf("%s: unknown key %s", source, name)
		if s := knownConfigKeys.suggest(strings.Split(key, "[")[0]); s != "" && s != key {
			msg += "; did you mean " + s + "?"
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// envVar is the variable that sets key: llm.base_url is NOMOS_LLM__BASE_URL.
func envVar(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}

// checkEnvSeparators refuses a NOMOS_ variable that spells a config key
// with single underscores (NOMOS_LLM_MODEL for NOMOS_LLM__MODEL), which
// would otherwise be ignored like the variables that are not config.
func checkEnvSeparators(environ []string) error {
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, envPrefix)
		if !ok || strings.Contains(rest, "__") {
			continue
		}
		for key := range knownConfigKeys.leaves {
			if strings.EqualFold(strings.ReplaceAll(key, ".", "_"), rest) {
				errs = append(errs, fmt.Errorf("environment: %s is not read; a section and its key are joined by two underscores: %s", name, envVar(key)))
			}
		}
	}
	return errors.Join(errs...)
}
