package store_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNeighbourhoodIsWhatAnOrderNeeds: for a service, itself, the host
// named beside it, the entities one edge away (its container among them)
// and the edges that touch it; nothing else of the fleet.
func TestNeighbourhoodIsWhatAnOrderNeeds(t *testing.T) {
	t.Parallel()
	s, ctx := seeded(t)
	jf := entityID(t, s, "service:jellyfin")
	ents, rels, err := s.Neighbourhood(ctx, jf.ID, "host:strong")
	if err != nil {
		t.Fatal(err)
	}
	// Itself, the host asked for, and the other end of every edge: its
	// container, and whatever it depends on or is depended on by.
	want := []string{"service:jellyfin", "host:strong"}
	for _, r := range rels {
		want = append(want, r.From, r.To)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	var slugs []string
	for _, e := range ents {
		slugs = append(slugs, e.Slug)
	}
	slices.Sort(slugs)
	if diff := cmp.Diff(want, slugs); diff != "" {
		t.Errorf("entities (-want +got):\n%s", diff)
	}
	if len(slugs) > 6 {
		t.Errorf("%d entities for one service: %v", len(slugs), slugs)
	}
	runs := false
	for _, r := range rels {
		if r.From != "service:jellyfin" && r.To != "service:jellyfin" {
			t.Errorf("edge %s -%s-> %s does not touch the service", r.From, r.Type, r.To)
		}
		runs = runs || (r.From == "lxc:strong/101" && r.To == "service:jellyfin" && r.Type == "runs")
	}
	if !runs {
		t.Errorf("no edge says lxc:strong/101 runs the service: %v", rels)
	}
}
