package hostgate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// DefaultRulesFile is where the gate looks for its rules.
const DefaultRulesFile = "/etc/nomos/gate.yaml"

// LoadRules reads the gate's rules file. A missing file means the defaults
// (no host shell, no privileged containers, no unit on the node changed
// by systemctl). The file holds one directive per line, "key: value", with
// blank lines and lines starting with # ignored: host_shell and
// privileged_containers, each true or false, and host_units, a block (see
// ParseRules). It must be a regular file that only its owner,
// root or the gate's own user, can write: otherwise whoever can write it
// could turn the host shell on, so the file is refused and so is every
// command.
func LoadRules(path string) (Rules, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Rules{}, nil
	}
	if err != nil {
		return Rules{}, fmt.Errorf("read rules %s: %w", path, err)
	}
	defer func() { _ = f.Close() }() // read-only
	info, err := f.Stat()
	if err != nil {
		return Rules{}, fmt.Errorf("read rules %s: %w", path, err)
	}
	if err := trusted(info); err != nil {
		return Rules{}, fmt.Errorf("rules %s: %w", path, err)
	}
	const limit = 64 << 10
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return Rules{}, fmt.Errorf("read rules %s: %w", path, err)
	}
	if len(data) > limit {
		return Rules{}, fmt.Errorf("rules %s: longer than %d bytes", path, limit)
	}
	r, err := ParseRules(string(data))
	if err != nil {
		return Rules{}, fmt.Errorf("rules %s: %w", path, err)
	}
	return r, nil
}

// trusted checks that only root or the gate's own user can change the file.
func trusted(info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("writable by others (mode %04o); chmod 0644 it", info.Mode().Perm())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not root", st.Uid)
	}
	return nil
}

// ParseRules reads the text of a rules file: one "key: value" a line,
// except host_units, whose value is the block of indented "UNIT: VERB,
// VERB" lines that follows it, as in YAML:
//
//	host_shell: false
//	host_units:
//	  caddy.service: restart, reload
func ParseRules(text string) (Rules, error) {
	var r Rules
	seen := map[string]bool{}
	inUnits := false
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if indented := raw[0] == ' ' || raw[0] == '\t'; indented {
			if !inUnits {
				return Rules{}, fmt.Errorf("line %d: an indented line outside host_units: %s", i+1, q(line))
			}
			u, err := parseHostUnit(line)
			if err != nil {
				return Rules{}, fmt.Errorf("line %d: %w", i+1, err)
			}
			if slices.ContainsFunc(r.HostUnits, func(h HostUnit) bool { return h.Unit == u.Unit }) {
				return Rules{}, fmt.Errorf("line %d: %s given twice", i+1, u.Unit)
			}
			r.HostUnits = append(r.HostUnits, u)
			continue
		}
		inUnits = false
		key, val, ok := strings.Cut(line, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		var field *bool
		switch key {
		case "host_shell":
			field = &r.HostShell
		case "privileged_containers":
			field = &r.PrivilegedContainers
		}
		switch {
		case !ok:
			return Rules{}, fmt.Errorf("line %d: want key: value, got %s", i+1, q(line))
		case field == nil && key != "host_units":
			return Rules{}, fmt.Errorf("line %d: unknown key %s (the keys are host_shell, privileged_containers and host_units)", i+1, q(key))
		case seen[key]:
			return Rules{}, fmt.Errorf("line %d: %s given twice", i+1, key)
		}
		seen[key] = true
		if key == "host_units" {
			if val != "" {
				return Rules{}, fmt.Errorf("line %d: host_units takes a block of indented lines, one a unit: \"  caddy.service: restart, reload\"", i+1)
			}
			inUnits = true
			continue
		}
		switch val {
		case "true":
			*field = true
		case "false":
		default:
			return Rules{}, fmt.Errorf("line %d: %s must be true or false, got %s", i+1, key, q(val))
		}
	}
	return r, nil
}
