package tasks_test

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/nomoshq/nomos/tasks"
)

// TestRotationOverlap: while a key is rotated, a message signed with the
// previous key or the new one verifies; once the previous key is dropped
// from the set, the old signature no longer does, and a key neither side
// configured never did.
func TestRotationOverlap(t *testing.T) {
	t.Parallel()
	oldPub, oldPriv := keys(t)
	newPub, newPriv := keys(t)
	_, strangerPriv := keys(t)
	sign := func(priv ed25519.PrivateKey) (order, result []byte) {
		t.Helper()
		order, err := tasks.SignOrder(priv, testOrder())
		if err != nil {
			t.Fatal(err)
		}
		result, err = tasks.SignResult(priv, testResult())
		if err != nil {
			t.Fatal(err)
		}
		return order, result
	}
	oldOrder, oldResult := sign(oldPriv)
	newOrder, newResult := sign(newPriv)
	strangerOrder, strangerResult := sign(strangerPriv)

	overlap := tasks.RotatingKeys(newPub, oldPub)
	after := tasks.RotatingKeys(newPub, nil)
	tests := []struct {
		name    string
		keys    tasks.VerifyKeys
		order   []byte
		result  []byte
		wantErr error
	}{
		{"old key during the overlap", overlap, oldOrder, oldResult, nil},
		{"new key during the overlap", overlap, newOrder, newResult, nil},
		{"a stranger's key during the overlap", overlap, strangerOrder, strangerResult, tasks.ErrBadSignature},
		{"old key once it is removed", after, oldOrder, oldResult, tasks.ErrBadSignature},
		{"new key once the old is removed", after, newOrder, newResult, nil},
		{"no key at all", nil, newOrder, newResult, tasks.ErrBadSignature},
		// A truncated key is a configuration fault: nothing verifies,
		// not even what the good key in the set would accept.
		{"a malformed key beside a good one", tasks.VerifyKeys{newPub, oldPub[:16]}, newOrder, newResult, tasks.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tasks.VerifyOrder(tt.keys, tt.order, now); !errors.Is(err, tt.wantErr) {
				t.Errorf("VerifyOrder = %v, want %v", err, tt.wantErr)
			}
			if _, err := tasks.VerifyResult(tt.keys, tt.result); !errors.Is(err, tt.wantErr) {
				t.Errorf("VerifyResult = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestVerifyKeysCheck(t *testing.T) {
	t.Parallel()
	pub, _ := keys(t)
	if err := tasks.RotatingKeys(pub, nil).Check(); err != nil {
		t.Errorf("one good key: %v", err)
	}
	if n := len(tasks.RotatingKeys(pub, nil)); n != 1 {
		t.Errorf("RotatingKeys without a previous key has %d keys, want 1", n)
	}
	for name, k := range map[string]tasks.VerifyKeys{
		"empty":             nil,
		"a nil current key": tasks.RotatingKeys(nil, pub),
		"a truncated key":   tasks.RotatingKeys(pub, pub[:31]),
	} {
		if err := k.Check(); err == nil {
			t.Errorf("%s: Check = nil, want an error", name)
		}
	}
}
