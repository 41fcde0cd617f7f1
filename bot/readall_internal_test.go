package bot

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nomoshq/nomos/executions"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// read is a succeeded read whose output is apt's list.
func read(t *testing.T, slug string, lines ...string) executions.ReadOutcome {
	t.Helper()
	out, err := json.Marshal(tasks.Result{Output: strings.Join(lines, "\n") + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	return executions.ReadOutcome{Target: slug, Execution: store.Execution{Request: store.Request{TargetSlug: slug, State: store.StateSucceeded}, Result: out}}
}

// TestUpdatesSummaryWorstFirst: the container with most security updates
// comes first, then the one whose update needs a restart, then by count;
// a list cut short is counted as a floor; failures, timeouts and reads
// held for approval are named with why, after them.
func TestUpdatesSummaryWorstFirst(t *testing.T) {
	t.Parallel()
	pkg := func(name, suite string) string {
		return fmt.Sprintf("%s/%s 2.0 amd64 [upgradable from: 1.0]", name, suite)
	}
	run := readAllRun{wait: "3m", names: map[string]string{"lxc:a/1": "many"}, outcomes: []executions.ReadOutcome{
		read(t, "lxc:a/1", "Listing...", pkg("aa", "stable"), pkg("bb", "stable"), pkg("cc", "stable")),
		read(t, "lxc:a/2", "Listing...", pkg("libc6", "stable")),
		read(t, "lxc:a/3", "Listing...", pkg("curl", "stable-security"), pkg("openssh-server", "stable-security")),
		read(t, "lxc:a/4", pkg("xx", "stable")),
		read(t, "lxc:a/5", "Listing..."),
		{Target: "lxc:a/6", Err: fmt.Errorf("%w: the read was still running after 3m", executions.ErrReadTimedOut)},
		{Target: "lxc:a/7", Execution: store.Execution{Request: store.Request{TargetSlug: "lxc:a/7", State: store.StateFailed}, Error: "exited 100\nmore"}},
		{Target: "lxc:a/8", Err: errors.Join(errors.New("boom"))},
	}}
	plain, htm := updatesSummary(run)
	order := []string{
		"lxc:a/3: 2 packages, 2 from security",
		"lxc:a/2: 1 package; ⚠️ libc6 need a restart",
		"many (lxc:a/1): 3 packages",
		"lxc:a/4: at least 1 package",
		"Could not check:",
		"lxc:a/6: timed out: no answer within 3m",
		"lxc:a/7: failed: exited 100",
		"lxc:a/8: Something went wrong",
		"Up to date: lxc:a/5.",
		"Total: 7 packages upgradable on 4 containers, 2 from security; 1 need a restart after the upgrade; 1 up to date; 3 could not be checked.",
	}
	at := 0
	for _, w := range order {
		i := strings.Index(plain[at:], w)
		if i < 0 {
			t.Fatalf("the summary does not say %q after position %d:\n%s", w, at, plain)
		}
		at += i + len(w)
	}
	if strings.Contains(plain, "more") || !strings.Contains(htm, "<li>") {
		t.Errorf("the summary is not one line per container with an HTML list:\n%s\n%s", plain, htm)
	}
}
