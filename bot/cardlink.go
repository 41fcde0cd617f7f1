package bot

import (
	"net/url"
	"strings"

	"github.com/google/uuid"
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

// windowURL links a maintenance window on the status page's overview,
// which lists the open windows; empty without a status page.
func windowURL(statusURL, windowID string) string {
	base := safeURL(statusURL)
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/#window-" + windowID
}
