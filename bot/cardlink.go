package bot

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/store"
)

// executionURL is the status page's detail page of the card's execution,
// or "" when there is no http(s) status page to link to.
func executionURL(v CardView) string {
	base, id := safeURL(v.StatusURL), v.Planned.Execution.ID
	if base == "" || id == uuid.Nil {
		return ""
	}
	u, err := url.JoinPath(base, "executions", id.String())
	if err != nil {
		return ""
	}
	return u
}

// detailsLink ends a card with a link to its execution's page, where the
// whole plan, its timeline, its approvals and its full output are.
func detailsLink(m *bodies, v CardView) {
	if u := executionURL(v); u != "" {
		m.para("Details: "+u, `<a href="`+escape(u)+`">Details on the status page</a>`)
	}
}

// cardEventURL links a plan's card for Matrix clients, or "" before it
// has one.
func cardEventURL(x store.Execution) string {
	if x.RoomID == "" || x.CardEventID == "" {
		return ""
	}
	return matrixTo(id.RoomID(x.RoomID)) + "/" + url.PathEscape(x.CardEventID)
}

// NoticeAlreadyWaiting answers a request for a change whose plan still
// awaits a decision: no second card, the first one's code and link.
func NoticeAlreadyWaiting(x store.Execution, statusURL string) (plain, html string) {
	what := fmt.Sprintf("%s %s", x.Action, x.TargetSlug)
	plain = fmt.Sprintf("Already queued: plan %s (%s) is waiting for a decision; I made no second card. Approve or deny that one.", x.PlanCode, what)
	html = fmt.Sprintf("Already queued: plan <code>%s</code> (%s) is waiting for a decision; I made no second card. Approve or deny that one.",
		escape(x.PlanCode), escape(what))
	if u := cardEventURL(x); u != "" {
		plain += " Its card: " + u
		html += ` <a href="` + escape(u) + `">Its card</a>.`
	}
	if base, err := url.JoinPath(safeURL(statusURL), "executions", x.ID.String()); err == nil && safeURL(statusURL) != "" {
		plain += " Details: " + base
		html += ` <a href="` + escape(base) + `">Details</a>.`
	}
	return plain, html
}

// windowURL links a maintenance window on the status page's overview,
// which lists the open windows; empty without a status page.
func windowURL(statusURL, windowID string) string {
	base := safeURL(statusURL)
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/#window-" + windowID
}
