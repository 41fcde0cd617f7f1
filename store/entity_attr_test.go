package store_test

import (
	"encoding/json"
	"testing"

	"github.com/nomoshq/nomos/store"
)

func TestEntityAttrs(t *testing.T) {
	t.Parallel()
	e := store.Entity{Attrs: map[string]any{
		"host": "strong", "vmid": float64(101), "port": "8096", "cores": 4, "mem": int64(512),
		"disk": json.Number("12"), "ip": 7.5, "bad": "x1",
	}}
	for key, want := range map[string]string{"host": "strong", "vmid": "", "port": "8096", "missing": ""} {
		if got := e.AttrString(key); got != want {
			t.Errorf("AttrString(%s) = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]int{"vmid": 101, "port": 8096, "cores": 4, "mem": 512, "disk": 12, "ip": 7, "bad": 0, "host": 0, "missing": 0} {
		if got := e.AttrInt(key); got != want {
			t.Errorf("AttrInt(%s) = %d, want %d", key, got, want)
		}
	}
}
