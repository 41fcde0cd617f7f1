// Package executions is the lifecycle of a gated action: request (validate,
// resolve, classify, persist), decide (approve, deny, cancel, expire), sign
// and dispatch to the actuator, apply its progress and results, and
// reconcile what Redis may have lost. Every transition is a compare-and-set
// in the store with an audit row, so two deciders or two deliveries of the
// same result can never move an execution twice.
//
// Beside the lifecycle it runs the fleet's read-only traffic with the
// actuator: the prober (each due check as a signed probe) and fleet
// discovery (each host's inventory, applied to the fleet by the store).
package executions
