package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestStepsHash(t *testing.T) {
	t.Parallel()
	stop := mustHash(t, mustPlan(t, PctStopParams{}, lxc131))
	destroy := mustHash(t, mustPlan(t, PctDestroyParams{}, lxc131))
	snap := mustHash(t, mustPlan(t, PctSnapshotParams{Name: "before"}, lxc131))

	base, err := StepsHash([]string{stop, destroy})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := StepsHash([]string{stop, destroy})
	if base != again || len(base) != 64 {
		t.Fatalf("StepsHash is not stable: %s vs %s", base, again)
	}
	// Any step changed, added, dropped or moved is another plan, and the
	// hash over steps never equals one step's own hash.
	for name, steps := range map[string][]string{
		"reordered":     {destroy, stop},
		"step changed":  {snap, destroy},
		"step added":    {stop, destroy, snap},
		"step repeated": {stop, stop},
	} {
		h, err := StepsHash(steps)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h == base {
			t.Errorf("%s: same hash as the original plan", name)
		}
		for _, s := range steps {
			if h == s {
				t.Errorf("%s: the plan hash equals a step's hash", name)
			}
		}
	}
	for name, steps := range map[string][]string{
		"one step":   {stop},
		"none":       nil,
		"not a hash": {stop, "deadbeef"},
		"too many":   strings.Fields(strings.Repeat(stop+" ", MaxPlanSteps+1)),
	} {
		if _, err := StepsHash(steps); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s: err = %v, want ErrInvalidPlan", name, err)
		}
	}
}
