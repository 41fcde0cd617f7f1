package mcpserver

import "testing"

func TestAllowlist(t *testing.T) {
	t.Parallel()
	l, err := parseAllowlist([]string{"GitHub.com.", " docs.example.org ", "203.0.113.7", "2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"github.com":               true,
		"raw.github.com":           true,
		"a.b.github.com":           true,
		"GITHUB.COM.":              true,
		"docs.example.org":         true,
		"example.org":              false,
		"notgithub.com":            false,
		"github.com.evil.example":  false,
		"github.co":                false,
		"203.0.113.7":              true,
		"203.0.113.8":              false,
		"2001:db8::1":              true,
		"::ffff:203.0.113.7":       true,
		"1.203.0.113.7":            false,
		"":                         false,
		"evil.example":             false,
		"xn--github-com.evil.test": false,
	} {
		if got := l.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"https://github.com", "github.com:443", "*.github.com", "github.com/path", "", "git hub.com", "-x.com"} {
		if _, err := parseAllowlist([]string{bad}); err == nil {
			t.Errorf("parseAllowlist accepted %q", bad)
		}
	}
	if empty, _ := parseAllowlist(nil); !empty.empty() || empty.allows("github.com") {
		t.Error("an empty allowlist allows something")
	}
}
