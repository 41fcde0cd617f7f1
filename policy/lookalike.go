package policy

import (
	"fmt"
	"unicode"
)

//go:generate go run gen_lookalikes.go

// invisible reports whether r renders as nothing, so the plan card would
// not show it: every default-ignorable code point (Unicode's derived
// property Default_Ignorable_Code_Point: the format characters, variation
// selectors, the combining grapheme joiner, Hangul fillers, Khmer inherent
// vowels, Mongolian free variation selectors, tags and the code points
// reserved for more of them) and every other format character (category
// Cf), bidirectional controls included. With "echo done <U+FE00>#; reboot"
// the card seems to show a comment, and the shell reboots.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// lookalike returns the shell syntax r is drawn like, when r is one the
// shell reads as a plain word character: with `echo ״x ; reboot ; y״` the
// card seems to show a quoted string, and sh runs reboot. The table comes
// from Unicode's confusables data (UTS #39) and the compatibility forms of
// the syntax characters; fullwidth ASCII counts too (ｒｍ looks like rm).
func lookalike(r rune) (string, bool) {
	if l, ok := lookalikes[r]; ok {
		return l, true
	}
	switch {
	case r == 0x266f: // MUSIC SHARP SIGN
		return "#", true
	case r >= 0xff01 && r <= 0xff5e: // fullwidth ASCII
		return string(r - 0xfee0), true
	}
	return "", false
}

// runeLabel names r for a refusal: "U+FE00 VARIATION SELECTOR-1".
func runeLabel(r rune) string {
	if n := runeNames[r]; n != "" {
		return fmt.Sprintf("%U %s", r, n)
	}
	return fmt.Sprintf("%U", r)
}
