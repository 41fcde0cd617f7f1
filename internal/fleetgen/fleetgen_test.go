package fleetgen_test

import (
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"

	"github.com/nomoshq/nomos/internal/fleetgen"
	"github.com/nomoshq/nomos/internal/fleetseed"
)

func TestDefaultFleetHasTheDocumentedSize(t *testing.T) {
	t.Parallel()
	seed := fleetgen.Seed(fleetgen.Config{})
	containers, services := 0, 0
	for _, h := range seed.Hosts {
		containers += len(h.Containers)
		for _, c := range h.Containers {
			services += len(c.Services)
		}
	}
	if len(seed.Hosts) != 10 || containers != 1000 || services != 3000 || len(seed.Checks) != 5000 {
		t.Errorf("%d hosts, %d containers, %d services, %d checks; want 10, 1,000, 3,000 and 5,000",
			len(seed.Hosts), containers, services, len(seed.Checks))
	}
	kinds := map[string]int{}
	for _, c := range seed.Checks {
		kinds[c.Kind]++
		if c.Interval == 0 {
			t.Errorf("check %s has no interval", c.Slug)
		}
	}
	if len(kinds) != 5 {
		t.Errorf("check kinds %v; want five kinds", kinds)
	}
}

// The generated fleet is a seed the loader accepts, as if written by hand.
func TestGeneratedFleetIsAValidSeed(t *testing.T) {
	t.Parallel()
	seed := fleetgen.Seed(fleetgen.Config{Hosts: 3, Containers: 30, Addr: func(i int) string { return "127.0.0.1:" + string(rune('1'+i)) + "022" }})
	fleet, err := yaml.Marshal(map[string]any{"hosts": seed.Hosts})
	if err != nil {
		t.Fatal(err)
	}
	checks, err := yaml.Marshal(map[string]any{"checks": seed.Checks})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := fleetseed.Load(fstest.MapFS{"fleet.yaml": {Data: fleet}, "checks.yaml": {Data: checks}})
	if err != nil {
		t.Fatalf("the generated fleet does not load: %v", err)
	}
	if len(loaded.Hosts) != 3 || len(loaded.Checks) != 150 {
		t.Errorf("loaded %d hosts and %d checks, want 3 and 150", len(loaded.Hosts), len(loaded.Checks))
	}
}
