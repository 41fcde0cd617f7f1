package tasks_test

import (
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

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
		if _, err := tasks.VerifyOrder(pub, payload, at); err != nil {
			b.Fatal(err)
		}
	}
}
