package policy

import (
	"fmt"
	"slices"
)

// Class is a risk class. Classes are ordered and compare with < and >:
// ReadOnly < ReversibleLow < ConfigMutation < Destructive. The zero value is
// not a class; it means "unset" in an Override.
type Class uint8

// The risk classes, least risky first.
const (
	// ReadOnly observes and changes nothing; it approves itself.
	ReadOnly Class = iota + 1
	// ReversibleLow changes state in a way one obvious step undoes, such as
	// restarting a service or starting a container.
	ReversibleLow
	// ConfigMutation changes configuration or installed software, or runs
	// commands the classifier cannot prove read-only.
	ConfigMutation
	// Destructive may lose data or take a host down; only the typed phrase
	// approves it.
	Destructive
)

var classNames = [...]string{
	ReadOnly:       "read_only",
	ReversibleLow:  "reversible_low",
	ConfigMutation: "config_mutation",
	Destructive:    "destructive",
}

// Classes lists every class, least risky first.
func Classes() []Class { return []Class{ReadOnly, ReversibleLow, ConfigMutation, Destructive} }

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool { return c >= ReadOnly && c <= Destructive }

// String returns the snake_case name, e.g. "config_mutation".
func (c Class) String() string {
	if c.Valid() {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ParseClass parses a snake_case class name.
func ParseClass(s string) (Class, error) {
	for _, c := range Classes() {
		if classNames[c] == s {
			return c, nil
		}
	}
	return 0, configErr("class must be one of read_only, reversible_low, config_mutation, destructive, got %s", quoted(s))
}

// MarshalText encodes the class by name; the zero Class encodes as "".
func (c Class) MarshalText() ([]byte, error) {
	if c == 0 {
		return nil, nil
	}
	if !c.Valid() {
		return nil, configErr("cannot encode %s", c)
	}
	return []byte(classNames[c]), nil
}

// UnmarshalText decodes a class name; "" decodes to the zero Class (unset).
func (c *Class) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = 0
		return nil
	}
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Risk is a class with the reasons that led to it, most severe first, each a
// short phrase fit for a plan card.
//
// Secrets lists what may print a secret (a key file, /etc/shadow, the
// environment), each a short phrase such as "cat /etc/pve/priv/token.cfg";
// a command that may reveal one is never read_only, whatever it does
// otherwise, and its Reasons say so too.
type Risk struct {
	Class   Class
	Reasons []string
	Secrets []string
}

// riskBuilder accumulates a class and its reasons; the class only ever rises.
type riskBuilder struct {
	class   Class
	reasons []reason
	secrets []string
}

// secret records something that may reveal a secret.
func (b *riskBuilder) secret(what string) {
	if !slices.Contains(b.secrets, what) {
		b.secrets = append(b.secrets, what)
	}
}

type reason struct {
	class Class
	text  string
}

func (b *riskBuilder) raise(c Class, text string) {
	b.class = max(b.class, c)
	if text == "" {
		return
	}
	for _, r := range b.reasons {
		if r.text == text {
			return
		}
	}
	b.reasons = append(b.reasons, reason{c, text})
}

func (b *riskBuilder) merge(r Risk) {
	b.class = max(b.class, r.Class)
	for _, t := range r.Reasons {
		b.raise(r.Class, t)
	}
	for _, s := range r.Secrets {
		b.secret(s)
	}
}

// maxReasons bounds Risk.Reasons so a pathological script cannot produce a
// plan card full of them.
const maxReasons = 8

func (b *riskBuilder) risk() Risk {
	c := b.class
	if c == 0 {
		c = ReadOnly
	}
	rs := slices.Clone(b.reasons)
	slices.SortStableFunc(rs, func(x, y reason) int { return int(y.class) - int(x.class) })
	out := make([]string, 0, min(len(rs), maxReasons))
	for _, r := range rs {
		if len(out) == maxReasons {
			break
		}
		out = append(out, r.text)
	}
	var secrets []string
	if len(b.secrets) > 0 {
		secrets = slices.Clone(b.secrets[:min(len(b.secrets), maxReasons)])
	}
	return Risk{Class: c, Reasons: out, Secrets: secrets}
}
