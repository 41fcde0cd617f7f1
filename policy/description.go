package policy

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDescriptionLen bounds a container description Nomos writes, in bytes.
// Proxmox takes up to 8 KiB; one line of provenance needs far less.
const MaxDescriptionLen = 512

// descriptionPunct is the punctuation a description may carry besides
// letters, digits and the ASCII space: enough for a Matrix user id, a uuid
// and a sentence, and nothing a shell, Markdown or HTML gives meaning to
// ($ ` \ < > [ ] { } | ~ ^).
const descriptionPunct = ".,;:!?'\"()/@#%&+=_-*"

// ValidateDescription checks a container description: one line of at most
// MaxDescriptionLen bytes of letters, digits, ASCII spaces and plain
// punctuation. Proxmox keeps the description as comment lines in the
// container's config and the web interface renders it as Markdown, so a
// description that could carry a line break, a control or formatting
// character, or markup is refused.
func ValidateDescription(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > MaxDescriptionLen:
		return fmt.Errorf("must be at most %d bytes, got %d", MaxDescriptionLen, len(s))
	case !utf8.ValidString(s):
		return errors.New("must be valid UTF-8")
	case s[0] == ' ' || s[len(s)-1] == ' ' || strings.Contains(s, "  "):
		return errors.New("must not start or end with a space or hold two in a row")
	case s[0] == '-':
		return errors.New("must not start with '-', which pct would read as an option")
	}
	for i, r := range s {
		if !descriptionRune(r) {
			return fmt.Errorf("must hold only letters, digits, spaces and %s, got %U at byte %d", descriptionPunct, r, i)
		}
	}
	return nil
}

func descriptionRune(r rune) bool {
	return r == ' ' || unicode.IsLetter(r) || unicode.IsDigit(r) || (r < utf8.RuneSelf && strings.ContainsRune(descriptionPunct, r))
}

// CreateDescription is the description pct_create gives a container: who
// asked for it, through which execution, and why. Text ValidateDescription
// would refuse is folded to spaces and a long reason is cut, so the result
// always passes.
func CreateDescription(requestedBy, onBehalfOf, executionID, reason string) string {
	var b strings.Builder
	b.WriteString("Created by Nomos for " + cmp.Or(foldDescription(requestedBy), "an unnamed requester"))
	if obo := foldDescription(onBehalfOf); obo != "" {
		b.WriteString(" on behalf of " + obo)
	}
	if id := foldDescription(executionID); id != "" {
		b.WriteString(", execution " + id)
	}
	out := b.String()
	if why := foldDescription(reason); why != "" {
		out += ". Reason: " + why
	}
	if len(out) > MaxDescriptionLen {
		cut := MaxDescriptionLen - len("...")
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = strings.TrimRight(out[:cut], " ") + "..."
	}
	return out
}

// foldDescription replaces every run of characters a description may not
// hold with one space, and trims.
func foldDescription(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, " ") {
		if !descriptionRune(r) || r == ' ' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
