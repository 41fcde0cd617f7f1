package agent

import (
	"testing"

	"github.com/nomoshq/nomos/store"
)

// TestActingFor: a continuation acts for the operator the finished step
// was asked for, so approvals.self_approval holds them to the steps the
// agent asks for next too.
func TestActingFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		x    store.Execution
		want string
	}{
		{store.Execution{Request: store.Request{RequestedBy: "agent", RequestedVia: "agent", OnBehalfOf: "@op:x"}}, "@op:x"},
		{store.Execution{Request: store.Request{RequestedBy: "@op:x", RequestedVia: "agent"}}, "@op:x"},
		{store.Execution{Request: store.Request{RequestedBy: "agent", RequestedVia: "agent"}}, ""},
		{store.Execution{Request: store.Request{RequestedBy: "mcp:claude", RequestedVia: "mcp"}}, ""},
	} {
		if got := actingFor(tt.x); got != tt.want {
			t.Errorf("actingFor(%s via %s for %q) = %q, want %q", tt.x.RequestedBy, tt.x.RequestedVia, tt.x.OnBehalfOf, got, tt.want)
		}
	}
}
