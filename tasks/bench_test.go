package tasks_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

func ed25519Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, msg, sig)
}

func BenchmarkSignOrder(b *testing.B) {
	_, priv := keys(b)
	o := testOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tasks.SignOrder(priv, o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyOrder(b *testing.B) {
	pub, priv := keys(b)
	payload, err := tasks.SignOrder(priv, testOrder())
	if err != nil {
		b.Fatal(err)
	}
	at := now.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, payload, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyResult is what the bot pays per result it takes off the
// results queue: a result with a full 8 KiB output tail and a few phases.
func BenchmarkVerifyResult(b *testing.B) {
	pub, priv := keys(b)
	r := testResult()
	r.Output = strings.Repeat("Dec 02 10:15:01 jellyfin systemd[1]: Started jellyfin.service.\n", (8<<10)/64)
	r.Phases = []tasks.Phase{{Name: "snapshot", Status: tasks.StatusSucceeded}, {Name: "restart", Status: tasks.StatusSucceeded}}
	payload, err := tasks.SignResult(priv, r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tasks.VerifyResult(tasks.VerifyKeys{pub}, payload); err != nil {
			b.Fatal(err)
		}
	}
}
