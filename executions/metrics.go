package executions

import (
	"github.com/nomoshq/nomos/store"
)

// observeDecision records how long a plan waited for an operator's
// decision, from its card (the execution's creation) to the decision.
func (s *Service) observeDecision(x store.Execution) {
	if x.Approval == nil {
		return
	}
	s.cfg.Metrics.Approval(x.Approval.Decision, x.RiskClass, x.Approval.DecidedAt.Sub(x.CreatedAt))
}

// observeEnd records how long an approved execution took to end, from its
// approval, when its order is signed and sent, to its end state. The
// store keeps no dispatch time of its own; Approve dispatches at once.
func (s *Service) observeEnd(x store.Execution) {
	if x.Approval == nil || x.Approval.Decision != "approved" || !x.State.Terminal() {
		return
	}
	s.cfg.Metrics.ExecutionEnded(string(x.State), x.RiskClass, x.UpdatedAt.Sub(x.Approval.DecidedAt))
}
