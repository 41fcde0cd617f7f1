package main

import (
	"context"
	"slices"
	"strings"

	"github.com/nomoshq/nomos/store"
)

// checkSite checks that the site the actuator serves is one the fleet
// has, with hosts in it: an actuator of a misspelt site consumes a queue
// nothing is sent to, and says nothing. It runs only where the config
// names a database, as on a machine running both roles.
func (d *doctor) checkSite(ctx context.Context) []checkLine {
	site := d.cfg.Actuator.Site
	st, err := store.Open(ctx, store.Config{URL: d.cfg.Database.URL, MaxConns: 2, Logger: d.logger})
	if err != nil {
		return []checkLine{fail("site: cannot open the database: "+err.Error(), "see the postgres line")}
	}
	defer st.Close()
	sites, err := st.Sites(ctx)
	if err != nil {
		return []checkLine{fail("site: cannot read the sites: "+err.Error(), "run `nomos migrate` with this config")}
	}
	if !slices.Contains(sites, site) {
		return []checkLine{fail("site "+site+": the fleet has no such site (it has "+strings.Join(sites, ", ")+")",
			"set actuator.site to one of them, or put hosts in "+site+" with site: "+site+" in the seed files and run `nomos seed`")}
	}
	hosts, err := st.SiteHosts(ctx, site)
	if err != nil {
		return []checkLine{fail("site "+site+": cannot read its hosts: "+err.Error(), "see the postgres line")}
	}
	if len(hosts) == 0 {
		return []checkLine{fail("site "+site+": no live host is in it, so this actuator will get no work",
			"put hosts in it with site: "+site+" in the seed files and run `nomos seed`, or set actuator.site to the site of your hosts")}
	}
	return []checkLine{pass("site " + site + ": the actuator serves " + strings.Join(hosts, ", "))}
}
