package policy

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestCheckShellRefusesInvisibleAndLookalikes is issue 19's point 5: every
// default-ignorable code point and every look-alike of shell syntax is
// refused, and the refusal names the code point.
func TestCheckShellRefusesInvisibleAndLookalikes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd, want string // want "" means accepted
	}{
		{"echo done \ufe00#; reboot", "U+FE00 VARIATION SELECTOR-1 is invisible (at byte 10)"},
		{"echo done \ufe0e#; reboot", "U+FE0E VARIATION SELECTOR-15 is invisible"},
		{"echo done \ufe0f#; reboot", "U+FE0F VARIATION SELECTOR-16 is invisible"},
		{"echo done \U000E0100#; reboot", "U+E0100 VARIATION SELECTOR-17 is invisible"},
		{"echo done \U000E01EF#; reboot", "U+E01EF VARIATION SELECTOR-256 is invisible"},
		{"echo done \u034f#; reboot", "U+034F COMBINING GRAPHEME JOINER is invisible"},
		{"echo done \u17b4#; reboot", "U+17B4 KHMER VOWEL INHERENT AQ is invisible"},
		{"echo done \u17b5#; reboot", "U+17B5 KHMER VOWEL INHERENT AA is invisible"},
		{"echo done \u115f#; reboot", "U+115F HANGUL CHOSEONG FILLER is invisible"},
		{"echo done \u1160#; reboot", "U+1160 HANGUL JUNGSEONG FILLER is invisible"},
		{"echo done \u3164#; reboot", "U+3164 HANGUL FILLER is invisible"},
		{"echo done \uffa0#; reboot", "U+FFA0 HALFWIDTH HANGUL FILLER is invisible"},
		{"echo done \u180b#; reboot", "U+180B MONGOLIAN FREE VARIATION SELECTOR ONE is invisible"},
		{"echo done \u180e#; reboot", "U+180E MONGOLIAN VOWEL SEPARATOR is invisible"},
		{"echo done \u180f#; reboot", "U+180F MONGOLIAN FREE VARIATION SELECTOR FOUR is invisible"},
		{"echo done \u2065#; reboot", "U+2065 is invisible"},
		{"echo done \ufff0#; reboot", "U+FFF0 is invisible"},
		{"echo done \U000E0001#; reboot", "U+E0001 LANGUAGE TAG is invisible"},
		{"echo done \U000E0041#; reboot", "U+E0041 TAG LATIN CAPITAL LETTER A is invisible"},
		{"echo done \U000E007F#; reboot", "U+E007F CANCEL TAG is invisible"},
		{"echo done \U000E0FFF#; reboot", "U+E0FFF is invisible"},
		{"echo done \u200b#; reboot", "U+200B ZERO WIDTH SPACE is invisible"},
		{"echo done \u00ad#; reboot", "U+00AD SOFT HYPHEN is invisible"},
		{"echo \u05f4x ; reboot ; y\u05f4", `U+05F4 HEBREW PUNCTUATION GERSHAYIM looks like " but is not (at byte 5)`},
		{"echo \ua78cx ; reboot ; y\ua78c", "U+A78C LATIN SMALL LETTER SALTILLO looks like ' but is not"},
		{"sleep 1 \ufe60 reboot", "U+FE60 SMALL AMPERSAND looks like & but is not"},
		{"false \u01c0\u01c0 reboot", "U+01C0 LATIN LETTER DENTAL CLICK looks like | but is not"},
		{"echo x \u02c3 /etc/motd", "U+02C3 MODIFIER LETTER RIGHT ARROWHEAD looks like > but is not"},
		// Their kin, from the confusables data and compatibility forms.
		{"false \u2016 reboot", "U+2016 DOUBLE VERTICAL LINE looks like || but is not"},
		{"false \u01c1 reboot", "U+01C1 LATIN LETTER LATERAL CLICK looks like || but is not"},
		{"echo x \u2223 tee y", "U+2223 DIVIDES looks like | but is not"},
		{"echo \u02bax ; reboot\u02ba", `U+02BA MODIFIER LETTER DOUBLE PRIME looks like " but is not`},
		{"echo \u201cx ; reboot\u201d", `U+201C LEFT DOUBLE QUOTATION MARK looks like " but is not`},
		{"echo \uff02x ; reboot\uff02", `U+FF02 FULLWIDTH QUOTATION MARK looks like " but is not`},
		{"echo hi \ufe5f; reboot", "U+FE5F SMALL NUMBER SIGN looks like # but is not"},
		{"echo hi \ufe54 reboot", "U+FE54 SMALL SEMICOLON looks like ; but is not"},
		{"echo hi \u037e reboot", "U+037E GREEK QUESTION MARK looks like ; but is not"},
		{"echo \ufe69HOME", "U+FE69 SMALL DOLLAR SIGN looks like $ but is not"},
		{"echo \u2039x\u203a", "U+2039 SINGLE LEFT-POINTING ANGLE QUOTATION MARK looks like < but is not"},
		{"ls \u2215etc", "U+2215 DIVISION SLASH looks like / but is not"},
		{"rm \u2013rf x", "U+2013 EN DASH looks like - but is not"},
		{"echo \u2217", "U+2217 ASTERISK OPERATOR looks like * but is not"},
		{"echo \u2768x\u2769", "U+2768 MEDIUM LEFT PARENTHESIS ORNAMENT looks like ( but is not"},
		{"echo \u2774x\u2775", "U+2774 MEDIUM LEFT CURLY BRACKET ORNAMENT looks like { but is not"},
		{"echo \u02dc", "U+02DC SMALL TILDE looks like ~ but is not"},
		{"x\u207c1", "U+207C SUPERSCRIPT EQUALS SIGN looks like = but is not"},
		{"echo \u01c3", "U+01C3 LATIN LETTER RETROFLEX CLICK looks like ! but is not"},
		{"echo \u29f5", "U+29F5 REVERSE SOLIDUS OPERATOR looks like \\ but is not"},
		{"echo \uff3bx\uff3d", "U+FF3B FULLWIDTH LEFT SQUARE BRACKET looks like [ but is not"},
		{"echo \u203c", "U+203C DOUBLE EXCLAMATION MARK looks like !! but is not"},
		{"echo \u2047", "U+2047 DOUBLE QUESTION MARK looks like ?? but is not"},
		// Text in other scripts, accents, CJK and emoji stay usable.
		{"echo héllo 日本 ✅", ""},
		{"echo 'Привет, мир'", ""},
		{"echo 'Ιωάννης Παπαδόπουλος'", ""},
		{"echo 'שלום' 'مرحبا' 'カタカナ' '中文'", ""},
		{"echo ノート", "U+30CE KATAKANA LETTER NO looks like / but is not"},
		{"echo naïve café — done", ""},
	}
	for _, tt := range tests {
		err := checkShell("command", tt.cmd, MaxCommandLen, true)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkShell(%q) = %v, want accepted", tt.cmd, err)
		case tt.want != "" && err == nil:
			t.Errorf("checkShell(%q) accepted it, want %q", tt.cmd, tt.want)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("checkShell(%q) = %v, want it to contain %q", tt.cmd, err, tt.want)
		}
	}
}

// TestInvisibleCoversDefaultIgnorable checks invisible against Unicode's
// own list of default-ignorable code points, and that it adds only format
// characters to it.
func TestInvisibleCoversDefaultIgnorable(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/unicode/DerivedCoreProperties-DICP.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	listed := map[rune]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		cps, prop, ok := strings.Cut(line, ";")
		if !ok || strings.TrimSpace(prop) != "Default_Ignorable_Code_Point" {
			continue
		}
		lo, hi, isRange := strings.Cut(strings.TrimSpace(cps), "..")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.ParseUint(lo, 16, 32)
		last, err2 := strconv.ParseUint(hi, 16, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		for r := rune(first); r <= rune(last); r++ {
			listed[r] = true
		}
	}
	if len(listed) != 4174 {
		t.Fatalf("read %d default-ignorable code points, want the 4174 of Unicode 15.0.0", len(listed))
	}
	for r := range listed {
		if !invisible(r) {
			t.Errorf("%s is default-ignorable and not refused as invisible", runeLabel(r))
		}
		if err := checkShell("command", "echo x"+string(r), MaxCommandLen, true); err == nil {
			t.Errorf("checkShell accepts %s", runeLabel(r))
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if invisible(r) && !listed[r] && !unicode.Is(unicode.Cf, r) {
			t.Errorf("%s is refused as invisible and is neither default-ignorable nor a format character", runeLabel(r))
		}
	}
}

// TestLookalikesCoverConfusables reads the confusables data again, apart
// from the generator: every character it draws like a syntax character,
// but for letters and digits drawn like | (which is drawn like l), is
// refused; and the generated table comes from the vendored data's version.
func TestLookalikesCoverConfusables(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/unicode/confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	proto := map[rune]string{}
	version := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# Version: "); ok {
			version = strings.TrimSpace(v)
		}
		fields := strings.Split(line, ";")
		if strings.HasPrefix(line, "#") || len(fields) < 3 {
			continue
		}
		src, err := strconv.ParseUint(strings.TrimSpace(fields[0]), 16, 32)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		var p strings.Builder
		for _, h := range strings.Fields(fields[1]) {
			v, err := strconv.ParseUint(h, 16, 32)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			p.WriteRune(rune(v))
		}
		proto[rune(src)] = p.String()
	}
	if version != confusablesVersion {
		t.Fatalf("testdata/unicode/confusables.txt is version %q, the table %q: run go generate ./policy/", version, confusablesVersion)
	}
	checked := 0
	for _, c := range ";|&<>()$`\\\"' #*?[]{}~=!/-" {
		want := string(c)
		if p, ok := proto[c]; ok {
			want = p
		}
		for src, p := range proto {
			if src < 0x80 || (p != want && p != string(c)) {
				continue
			}
			if strings.ContainsAny(p, "l") && unicode.In(src, unicode.L, unicode.N) {
				continue
			}
			checked++
			if _, ok := lookalike(src); !ok {
				t.Errorf("%s is drawn like %q (confusables.txt) and is not refused", runeLabel(src), c)
			}
		}
	}
	if checked < 150 {
		t.Fatalf("checked only %d look-alikes", checked)
	}
	// The hand-made list this table replaced.
	for _, r := range []rune{0x2018, 0x2019, 0x201b, 0x2032, 0x2035, 0x02b9, 0x02bc, 0x201c, 0x201d, 0x201f, 0x2033, 0x2036, 0x02ba, 0x266f, 0xfe5f, 0x037e, 0xfe54, 0xff02, 0xff03, 0xff52} {
		if _, ok := lookalike(r); !ok {
			t.Errorf("%s is no longer refused", runeLabel(r))
		}
	}
}
