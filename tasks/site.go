package tasks

// DefaultSite is the site of a host that names none, and of an actuator
// configured without one, so a deployment of one site needs no setting.
const DefaultSite = "default"

// OrderQueue is the queue of a site's approved orders. Only that site's
// actuator consumes it, and an order that turns up on another site's
// queue is refused by the order's signed site, not by the queue.
func OrderQueue(site string) string { return "nomos:orders:" + site }

// ProbeQueue is the queue of a site's probe and inventory requests, served
// by that site's actuator from a pool apart from its orders.
func ProbeQueue(site string) string { return "nomos:probes:" + site }

// siteOf is the site a signed request is for; a request signed before
// sites existed is for the default one.
func siteOf(s string) string {
	if s == "" {
		return DefaultSite
	}
	return s
}

// OrderLease is the Redis key an actuator holds, with a short expiry it
// renews, while it carries out an execution's order. An order asynq shows
// as taken (active) whose lease has lapsed was taken by an actuator that
// died before it began the order; asynq itself would hold it for a minute
// or more (its own lease is 30 s, checked once a minute).
func OrderLease(site, executionID string) string {
	return "nomos:order-lease:" + siteOf(site) + ":" + executionID
}

// ReportLease is the Redis key the bot holds, with a short expiry it
// renews, while it applies the report of asynq task taskID from the
// results queue. A report asynq shows as taken whose lease has lapsed was
// taken by a bot that was killed; another bot puts a copy of it back.
func ReportLease(taskID string) string { return "nomos:report-lease:" + taskID }

// ReportResent marks a report of the results queue that a bot put back
// as a copy (the mark's value) because the bot that took it died. When
// asynq's own recoverer gives the original back, a minute or more later,
// it is dropped: the copy stands for it.
func ReportResent(taskID string) string { return "nomos:report-resent:" + taskID }
