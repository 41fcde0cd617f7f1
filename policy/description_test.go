package policy

import (
	"strings"
	"testing"
)

var descriptionTests = []struct {
	in   string
	want string // "" when valid, else part of the error
}{
	{"Created by Nomos for @alice:example.org, execution 0198c0de-0000-7000-8000-000000000001. Reason: it's for the wiki", ""},
	{"Grüße, 日本語 100% (ok) #1 a+b=c \"q\" *x* & y; z? w!", ""},
	{"", "must not be empty"},
	{"two\nlines", "U+000A"},
	{"cr\rhere", "U+000D"},
	{"tab\there", "U+0009"},
	{"x\x00y", "U+0000"},
	{"<img src=x onerror=alert(1)>", "U+003C"},
	{"[click](javascript:alert(1))", "U+005B"},
	{"$(reboot)", "U+0024"},
	{"`id`", "U+0060"},
	{`back\slash`, "U+005C"},
	{"pipe | here", "U+007C"},
	{"bidi \u202eevil", "U+202E"},
	{"zero\u200bwidth", "U+200B"},
	{"no\u00a0break", "U+00A0"},
	{"combining e\u0301", "U+0301"},
	{"fullwidth \uff02quote\uff02", "U+FF02"},
	{" leading", "space"},
	{"trailing ", "space"},
	{"two  spaces", "space"},
	{"-option", "'-'"},
	{strings.Repeat("a", MaxDescriptionLen), ""},
	{strings.Repeat("a", MaxDescriptionLen+1), "at most 512 bytes"},
	{"bad \xff utf8", "UTF-8"},
}

func TestValidateDescription(t *testing.T) {
	t.Parallel()
	for _, tt := range descriptionTests {
		err := ValidateDescription(tt.in)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateDescription(%q) = %v, want nil", tt.in, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateDescription(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestCreateDescription(t *testing.T) {
	t.Parallel()
	const id = "0198c0de-0000-7000-8000-000000000001"
	tests := []struct {
		by, obo, reason string
		want            string
	}{
		{"@alice:example.org", "", "", "Created by Nomos for @alice:example.org, execution " + id},
		{"agent", "@alice:example.org", "a wiki for the family", "Created by Nomos for agent on behalf of @alice:example.org, execution " + id + ". Reason: a wiki for the family"},
		{"mcp:claude", "", "line one\nline two <b>bold</b> $(reboot)", "Created by Nomos for mcp:claude, execution " + id + ". Reason: line one line two b bold /b (reboot)"},
		{"", "", "\u202e\u200b", "Created by Nomos for an unnamed requester, execution " + id},
	}
	for _, tt := range tests {
		got := CreateDescription(tt.by, tt.obo, id, tt.reason)
		if got != tt.want {
			t.Errorf("CreateDescription(%q, %q, %q):\n got %q\nwant %q", tt.by, tt.obo, tt.reason, got, tt.want)
		}
	}
	long := CreateDescription("@alice:example.org", "", id, strings.Repeat("é", 600))
	if len(long) > MaxDescriptionLen || !strings.HasSuffix(long, "...") || ValidateDescription(long) != nil {
		t.Errorf("a long reason gives %d bytes ending %q: %v", len(long), long[len(long)-8:], ValidateDescription(long))
	}
}

// FuzzCreateDescription: whatever the requester and reason hold, the
// description passes ValidateDescription.
func FuzzCreateDescription(f *testing.F) {
	for _, tt := range descriptionTests {
		f.Add("@alice:example.org", "", tt.in)
		f.Add(tt.in, tt.in, tt.in)
	}
	f.Fuzz(func(t *testing.T, by, obo, reason string) {
		d := CreateDescription(by, obo, "0198c0de-0000-7000-8000-000000000001", reason)
		if err := ValidateDescription(d); err != nil {
			t.Fatalf("CreateDescription(%q, %q, %q) = %q, which is refused: %v", by, obo, reason, d, err)
		}
	})
}
