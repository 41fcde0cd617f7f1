package mcpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nomoshq/nomos/policy"
)

// Scope is what an MCP token may do.
type Scope string

const (
	// ScopeRead allows the read tools only: nothing that requests an
	// execution (request_execution, get_lxc_state, tail_log) is listed or
	// callable.
	ScopeRead Scope = "read"
	// ScopeRequest allows every tool, including request_execution, whose
	// plans still wait for an operator like any other. Only a token with
	// an Owner may have it.
	ScopeRequest Scope = "request"
)

// Token is one bearer token the HTTP endpoint accepts. Only its SHA-256
// digest is kept, so neither a memory dump nor the config file gives the
// token away.
type Token struct {
	// Name identifies the client: what it requests is recorded as
	// requested_by "mcp:<Name>", on the card and in the audit log.
	Name string
	// SHA256 is the digest of the token the client sends.
	SHA256 [sha256.Size]byte
	// Scope is ScopeRead or ScopeRequest.
	Scope Scope
	// Owner is the Matrix user the token was made for. Every plan it
	// requests is on behalf of them, so with self-approval off they
	// cannot approve it. A token without one may only read.
	Owner string
}

// MinTokenLength is the shortest token accepted, so none can be guessed.
const MinTokenLength = 16

// HashToken returns the digest a Token keeps for token.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// ParseTokenHash reads a digest written as 64 hex digits, as
// `nomos mcp token` prints it.
func ParseTokenHash(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	raw, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(raw) != sha256.Size {
		return sum, errors.New("want the SHA-256 of the token as 64 hex digits")
	}
	copy(sum[:], raw)
	return sum, nil
}

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$`)

// ValidTokenName reports whether name may name a token: 1 to 40 letters,
// digits, dots, dashes and underscores, so it reads plainly in an audit row.
func ValidTokenName(name string) bool { return tokenName.MatchString(name) }

// validateTokens checks names, scopes and digests, and that no two tokens
// share a name or a digest (one of them could never be told apart).
func validateTokens(tokens []Token) error {
	names := map[string]bool{}
	sums := map[[sha256.Size]byte]bool{}
	for i, t := range tokens {
		switch {
		case !ValidTokenName(t.Name):
			return fmt.Errorf("mcpserver: token %d: name %q must be 1 to 40 letters, digits, '.', '_' or '-'", i, t.Name)
		case t.Scope != ScopeRead && t.Scope != ScopeRequest:
			return fmt.Errorf("mcpserver: token %s: scope %q must be read or request", t.Name, t.Scope)
		case t.Owner != "" && policy.ValidateMatrixUserID(t.Owner) != nil:
			return fmt.Errorf("mcpserver: token %s: owner: %v", t.Name, policy.ValidateMatrixUserID(t.Owner))
		case t.Scope == ScopeRequest && t.Owner == "":
			return fmt.Errorf("mcpserver: token %s: scope request needs the Matrix user the token is for (its owner), so that its plans are on their behalf", t.Name)
		case t.SHA256 == [sha256.Size]byte{}:
			return fmt.Errorf("mcpserver: token %s has no digest", t.Name)
		case names[t.Name]:
			return fmt.Errorf("mcpserver: two tokens are named %s", t.Name)
		case sums[t.SHA256]:
			return fmt.Errorf("mcpserver: token %s has the same digest as another token", t.Name)
		}
		names[t.Name], sums[t.SHA256] = true, true
	}
	return nil
}

// match returns the token whose digest is the presented token's. Every
// configured digest is compared, in constant time, so neither the time
// taken nor an early exit says which token came close.
func match(tokens []Token, presented string) (Token, bool) {
	sum := HashToken(presented)
	found := -1
	for i := range tokens {
		if subtle.ConstantTimeCompare(sum[:], tokens[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return tokens[found], true
}
