package labsim

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What pct create and pct set keep of --features and --tags, and what pct
// config shows of them and of the description, as pve-container does.

// systemdVersions is the systemd each template's release ships, by
// codename: pve-container warns about nesting above 241 (Debian 10).
var systemdVersions = map[string]int{
	"buster": 241, "bullseye": 247, "bookworm": 252, "trixie": 257,
	"jammy": 249, "noble": 255,
}

// nestingWarning is what pve-container's check_systemd_nesting says when
// a container whose systemd needs nesting starts (or is created) without
// it, or "" when it says nothing.
func nestingWarning(ct *ctState) string {
	if !ct.Conf.NoNesting {
		return ""
	}
	v := systemdVersions[templates[ct.Conf.Template].codename]
	if v <= 241 {
		return ""
	}
	return fmt.Sprintf("WARN: Systemd %d detected. You may need to enable nesting.\n", v)
}

// featureKeys are the keys of pve-container's features format.
var featureKeys = []string{"nesting", "keyctl", "fuse", "mknod", "mount", "force_rw_sys"}

// tagRE is one tag of a pve-tag-list (pve-common's PVE_TAG_RE).
var tagRE = regexp.MustCompile(`^(?i)[a-z0-9_][a-z0-9_+.-]*$`)

// applyCreateOptions reads --features and --tags. A container keeps only
// whether it has nesting; the other features are checked and accepted.
func applyCreateOptions(conf *ctConf, verb string, opts map[string]string) *pveError {
	if f, ok := opts["features"]; ok {
		nesting := false
		for _, kv := range strings.Split(f, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if !slices.Contains(featureKeys, k) {
				return paramError(verb, "features", fmt.Sprintf("invalid format - format error\nfeatures.%s: property is not defined in schema and the schema does not allow additional properties", k))
			}
			if k == "nesting" {
				b, ok := pveBool(v)
				if !ok {
					return paramError(verb, "features", fmt.Sprintf("invalid format - format error\nfeatures.nesting: type check ('boolean') failed - got '%s'", v))
				}
				nesting = b == "1"
			}
		}
		conf.NoNesting = !nesting
	}
	if t, ok := opts["tags"]; ok {
		var tags []string
		for _, tag := range strings.FieldsFunc(t, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
			if !tagRE.MatchString(tag) {
				return paramError(verb, "tags", "invalid format - invalid characters in tag")
			}
			tags = append(tags, tag)
		}
		conf.Tags = strings.Join(tags, ";")
	}
	return nil
}

// shownConfig turns a container's config file, as pctConfig renders it,
// into what pct config prints: keys sorted, and the description (comment
// lines in the file) as one key, through pve-common's encode_text.
func shownConfig(file string) string {
	var desc strings.Builder
	var lines []string
	for _, l := range strings.SplitAfter(file, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
			// parse_pct_config decodes each comment line and ends it with
			// a newline.
			desc.WriteString(decodeText(strings.TrimSuffix(l[1:], "\n")) + "\n")
		default:
			lines = append(lines, l)
		}
	}
	if desc.Len() > 0 {
		lines = append(lines, "description: "+encodeText(desc.String())+"\n")
	}
	slices.SortStableFunc(lines, func(a, b string) int {
		ka, _, _ := strings.Cut(a, ":")
		kb, _, _ := strings.Cut(b, ":")
		return strings.Compare(ka, kb)
	})
	return strings.Join(lines, "")
}

// decodeText undoes encodeText, as uri_unescape does: %XX becomes its
// byte, and a % without two hex digits stays.
func decodeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
