package main

import (
	"strings"
	"testing"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/seeds"
	"github.com/nomoshq/nomos/store"
)

func TestDoctorSite(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	databaseURL := testenv.DatabaseURL(t)
	st, err := store.Open(ctx, store.Config{URL: databaseURL, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	seed, err := fleetseed.Load(seeds.FS)
	if err != nil {
		t.Fatal(err)
	}
	seed.Hosts[1].Site = "east"
	if _, err := st.ApplySeed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if _, err := pgxExec(t, databaseURL, `INSERT INTO sites (name) VALUES ('empty')`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		site, want, fix string
		ok              bool
	}{
		{"default", "site default: the actuator serves " + seed.Hosts[0].Name, "", true},
		{"east", "site east: the actuator serves " + seed.Hosts[1].Name, "", true},
		{"eats", "site eats: the fleet has no such site (it has default, east, empty)", "set actuator.site to one of them", false},
		{"empty", "site empty: no live host is in it", "site: empty", false},
	} {
		cfg := &config.Config{Database: config.DatabaseConfig{URL: databaseURL}, Actuator: config.ActuatorConfig{Site: tc.site}}
		lines := newDoctor(cfg, []string{"actuator"}, testenv.Logger(t)).checkSite(ctx)
		if len(lines) != 1 || lines[0].ok != tc.ok || !strings.HasPrefix(lines[0].text, tc.want) || !strings.Contains(lines[0].fix, tc.fix) {
			t.Errorf("actuator.site %s: got %+v, want ok=%v %q (fix with %q)", tc.site, lines, tc.ok, tc.want, tc.fix)
		}
	}
}

func pgxExec(t *testing.T, databaseURL, sql string, args ...any) (int64, error) {
	t.Helper()
	var n int64
	err := pgxQueryRow(t, databaseURL, `WITH x AS (`+sql+` RETURNING 1) SELECT count(*) FROM x`, args...).Scan(&n)
	return n, err
}
