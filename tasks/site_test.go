package tasks_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nomoshq/nomos/tasks"
)

// The site is part of what the bot signs: an order, a probe request and
// an inventory request each carry it, one signed before sites existed is
// for the default site, and a site that could not name a queue is never
// signed.
func TestSiteIsSigned(t *testing.T) {
	t.Parallel()
	pub, priv := keys(t)

	o := testOrder()
	o.Site = "east"
	env, err := tasks.SignOrder(priv, o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, env, now.Add(time.Minute))
	if err != nil || got.Site != "east" {
		t.Fatalf("order for east verified as site %q, %v", got.Site, err)
	}

	// A Redis writer rewriting the site breaks the signature.
	var e tasks.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(e.Body, &body); err != nil {
		t.Fatal(err)
	}
	body["site"] = "west"
	e.Body, _ = json.Marshal(body)
	moved, _ := json.Marshal(e)
	if _, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, moved, now.Add(time.Minute)); !errors.Is(err, tasks.ErrBadSignature) {
		t.Errorf("an order whose site was rewritten verified: %v", err)
	}

	o.Site = ""
	env, err = tasks.SignOrder(priv, o)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tasks.VerifyOrder(tasks.VerifyKeys{pub}, env, now.Add(time.Minute)); err != nil || got.Site != tasks.DefaultSite {
		t.Errorf("an order naming no site verified as site %q, %v; want %q", got.Site, err, tasks.DefaultSite)
	}

	for _, bad := range []string{"East", "a:b", "-east", "site with spaces", "a234567890123456789012345678901234"} {
		o.Site = bad
		if _, err := tasks.SignOrder(priv, o); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("order for site %q signed: %v", bad, err)
		}
		c := testCheckRun()
		c.Site = bad
		if _, err := tasks.SignCheckRun(priv, c); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("probe for site %q signed: %v", bad, err)
		}
		r := testInventoryRun()
		r.Site = bad
		if _, err := tasks.SignInventoryRun(priv, r); !errors.Is(err, tasks.ErrMalformed) {
			t.Errorf("inventory for site %q signed: %v", bad, err)
		}
	}
}

func TestSiteQueues(t *testing.T) {
	t.Parallel()
	if got, want := tasks.OrderQueue("east"), "nomos:orders:east"; got != want {
		t.Errorf("OrderQueue(east) = %q, want %q", got, want)
	}
	if got, want := tasks.ProbeQueue("east"), "nomos:probes:east"; got != want {
		t.Errorf("ProbeQueue(east) = %q, want %q", got, want)
	}
}
