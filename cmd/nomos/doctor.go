package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"maunium.net/go/mautrix"

	"github.com/nomoshq/nomos/internal/config"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// devConfigPath is where `nomos dev` writes the config it runs the roles
// with; `nomos doctor` without -config checks that stack.
var devConfigPath = filepath.Join(".nomos-dev", "nomos.yaml")

// orDevConfig is path, or when none was given the dev stack's config in a
// checkout where `nomos dev` runs, or "" when there is none.
func orDevConfig(path string) string {
	if path == "" {
		if _, err := os.Stat(devConfigPath); err == nil {
			return devConfigPath
		}
	}
	return path
}

// devStore loads role's config (the dev stack's when none was given, in a
// checkout where `nomos dev` runs) and opens its database, for the
// commands that need only that. The caller closes the store.
func (e *roleEnv) devStore(ctx context.Context, role string) (*config.Config, *store.Store, error) {
	e.configPath = orDevConfig(e.configPath)
	cfg, err := e.config(role)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.Database.URL, Logger: e.logger})
	if err != nil {
		return nil, nil, err
	}
	return cfg, st, nil
}

// doctorRoles are the roles doctor knows how to check a config for.
var doctorRoles = []string{"migrate", "bot", "actuator", "mcp"}

// runDoctor is `nomos doctor`: it checks the config and everything the
// roles it is for depend on, prints one line per check with what to do
// about each failure, and fails when any check does.
func runDoctor(ctx context.Context, env *roleEnv, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	rolesFlag := fs.String("roles", "", "comma-separated `roles` to check the config for ("+strings.Join(doctorRoles, ", ")+"); default: every role the config has settings for")
	wait := fs.Duration("wait", 0, "retry failed checks for up to this `duration`, for a stack that is still starting")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: nomos [-config file] doctor [-roles bot,actuator] [-wait 1m]\n\nWithout -config (or NOMOS_CONFIG) it checks the dev stack of this checkout, "+devConfigPath+".\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	path := orDevConfig(env.configPath)
	cfg, err := config.Load(path, env.environ)
	if err != nil {
		lines := []checkLine{fail("config: cannot be loaded: "+err.Error(),
			"fix the file or the *_file path it names; deploy/nomos.example.yaml documents every key")}
		printCheckLines(env.stdout, lines)
		return errors.New("the config cannot be loaded")
	}
	roles := configRoles(cfg)
	if *rolesFlag != "" {
		roles = nil
		for r := range strings.SplitSeq(*rolesFlag, ",") {
			if r = strings.TrimSpace(r); !slices.Contains(doctorRoles, r) {
				return fmt.Errorf("-roles: %q: want some of %s", r, strings.Join(doctorRoles, ", "))
			}
			roles = append(roles, r)
		}
	}
	switch {
	case path == "" && len(roles) == 0:
		printCheckLines(env.stdout, []checkLine{fail("config: none given, and there is no "+devConfigPath+" here",
			"pass the config a role runs with (nomos -config FILE doctor, or NOMOS_CONFIG), or run it in the checkout where `make demo` runs")})
		return errors.New("no config to check")
	case path == devConfigPath && env.configPath == "":
		fmt.Fprintf(env.stdout, "checking the dev stack (%s) for %s\n", path, strings.Join(roles, ", "))
	default:
		fmt.Fprintf(env.stdout, "checking %s for %s\n", cmp.Or(path, "the NOMOS_ environment"), strings.Join(roles, ", "))
	}
	d := newDoctor(cfg, roles, env.logger)
	lines := d.run(ctx, *wait)
	printCheckLines(env.stdout, lines)
	if n := countFailed(lines); n > 0 {
		if path == devConfigPath {
			fmt.Fprintln(env.stdout, "The dev stack's homeserver and roles run only while `make demo` (nomos dev) does.")
		}
		return fmt.Errorf("%d of %d checks failed", n, len(lines))
	}
	return nil
}

// configRoles guesses which roles a config is for from the settings it
// has: a bot's config names a homeserver, an actuator's an SSH key, a
// local MCP client's the bot's MCP URL.
func configRoles(cfg *config.Config) []string {
	var roles []string
	switch {
	case cfg.Matrix.HomeserverURL != "":
		roles = append(roles, "bot")
	case cfg.Database.URL != "":
		roles = append(roles, "migrate")
	}
	if cfg.Actuator.SSHKeyFile != "" || cfg.Orders.VerifyKeyFile != "" || cfg.Reports.SigningKeyFile != "" {
		roles = append(roles, "actuator")
	}
	if cfg.MCP.URL != "" {
		roles = append(roles, "mcp")
	}
	return roles
}

// checkLine is one line of the doctor's report.
type checkLine struct {
	ok bool
	// text names what was checked and what was found.
	text string
	// fix says what to do about a failure, one step a line.
	fix string
}

func pass(text string) checkLine      { return checkLine{ok: true, text: text} }
func fail(text, fix string) checkLine { return checkLine{text: text, fix: fix} }

// doctorCheck is one entry of the doctor's table; it may report several
// lines (one per host, say).
type doctorCheck struct {
	name string
	run  func(ctx context.Context) []checkLine
}

// doctor checks one config. Every check is a method, so a test can run
// any of them against real services.
type doctor struct {
	cfg    *config.Config
	roles  []string
	logger *slog.Logger
	http   *http.Client
	now    func() time.Time
	// secrets are scrubbed from every line, since a report gets pasted
	// into chats and issues.
	secrets []string
	// session is the homeserver login, kept across retries and logged
	// out by close.
	session *mautrix.Client
}

func newDoctor(cfg *config.Config, roles []string, logger *slog.Logger) *doctor {
	d := &doctor{
		cfg: cfg, roles: roles, logger: logger, now: time.Now,
		http: &http.Client{Timeout: 10 * time.Second},
	}
	for _, s := range []string{cfg.Matrix.Password, cfg.Matrix.AccessToken, cfg.Matrix.PickleKey, cfg.LLM.APIKey,
		cfg.MCP.Token, cfg.MCP.ClientToken, cfg.Web.Auth.Password, urlPassword(cfg.Database.URL), urlPassword(cfg.Redis.URL)} {
		// A short value would be scrubbed out of ordinary words.
		if len(s) >= 8 {
			d.secrets = append(d.secrets, s)
		}
	}
	return d
}

func (d *doctor) hasRole(r string) bool { return slices.Contains(d.roles, r) }

// checks is the doctor's table: the checks that apply to this config, in
// the order they are reported.
func (d *doctor) checks() []doctorCheck {
	c := d.cfg
	all := []struct {
		applies bool
		check   doctorCheck
	}{
		{true, doctorCheck{"config", d.checkConfig}},
		{c.Database.URL != "", doctorCheck{"postgres", d.checkPostgres}},
		{c.Redis.URL != "", doctorCheck{"redis", d.checkRedis}},
		{c.Redis.URL != "" && d.hasRole("bot") != d.hasRole("actuator"), doctorCheck{"redis access", d.checkRedisAccess}},
		{c.Matrix.HomeserverURL != "", doctorCheck{"matrix", d.checkMatrix}},
		{c.Orders.SigningKeyFile != "" || c.Orders.VerifyKeyFile != "", doctorCheck{"order keys", d.checkOrderKeys}},
		{c.Reports.SigningKeyFile != "" || c.Reports.VerifyKeyFile != "", doctorCheck{"report keys", d.checkReportKeys}},
		{c.Actuator.SSHKeyFile != "" || c.Actuator.KnownHostsFile != "", doctorCheck{"ssh", d.checkSSH}},
		{d.hasRole("bot") && c.Database.URL != "", doctorCheck{"hosts", d.checkHosts}},
		{d.hasRole("actuator") && c.Database.URL != "", doctorCheck{"site", d.checkSite}},
		{c.LLM.Model != "", doctorCheck{"llm", d.checkLLM}},
		{len(c.MCP.Tokens) > 0 || c.MCP.Token != "" || c.MCP.ClientToken != "" || c.MCP.URL != "", doctorCheck{"mcp", d.checkMCP}},
		{d.hasRole("bot"), doctorCheck{"status page", d.checkWeb}},
	}
	var out []doctorCheck
	for _, a := range all {
		if a.applies {
			out = append(out, a.check)
		}
	}
	return out
}

// doctorRetry is how long run waits between rounds of failed checks.
const doctorRetry = 2 * time.Second

// run runs every check, then retries the failed ones until they pass or
// wait has passed, and returns the lines of the last round in table
// order.
func (d *doctor) run(ctx context.Context, wait time.Duration) []checkLine {
	defer d.close()
	checks := d.checks()
	results := make([][]checkLine, len(checks))
	deadline := d.now().Add(wait)
	pending := make([]int, len(checks))
	for i := range pending {
		pending[i] = i
	}
	for {
		for _, i := range pending {
			checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			results[i] = d.scrub(checks[i].run(checkCtx))
			cancel()
		}
		pending = pending[:0]
		for i, r := range results {
			if countFailed(r) > 0 {
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 || !d.now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(doctorRetry):
		}
		if ctx.Err() != nil {
			break
		}
	}
	var out []checkLine
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// close releases what the checks opened, once they have run.
//
//nolint:contextcheck // cleanup after run's context, bounded by its own timeout.
func (d *doctor) close() {
	if d.session != nil && d.cfg.Matrix.AccessToken == "" {
		// The doctor's own device goes, so a check leaves no session behind.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = d.session.Logout(ctx)
	}
	d.session = nil
}

// scrub keeps every line to one line of printable text without secrets:
// details can come from a host's output or a server's error.
func (d *doctor) scrub(lines []checkLine) []checkLine {
	clean := func(s string) string {
		for _, secret := range d.secrets {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
		return printable(s)
	}
	for i := range lines {
		lines[i].text = clean(lines[i].text)
		var fix []string
		for l := range strings.SplitSeq(lines[i].fix, "\n") {
			if l = clean(l); l != "" {
				fix = append(fix, l)
			}
		}
		lines[i].fix = strings.Join(fix, "\n")
	}
	return lines
}

// printable drops control characters (a terminal escape in a host's
// output must not reach the operator's terminal) and cuts s short.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	const maxLen = 400
	if len(s) > maxLen {
		s = strings.ToValidUTF8(s[:maxLen], "") + "…"
	}
	return s
}

func countFailed(lines []checkLine) int {
	n := 0
	for _, l := range lines {
		if !l.ok {
			n++
		}
	}
	return n
}

// printCheckLines prints the report: ✓ or ✗ and the finding, and under
// each ✗ what to do.
func printCheckLines(w io.Writer, lines []checkLine) {
	for _, l := range lines {
		if l.ok {
			fmt.Fprintf(w, "✓ %s\n", l.text)
			continue
		}
		fmt.Fprintf(w, "✗ %s\n", l.text)
		for f := range strings.SplitSeq(l.fix, "\n") {
			if f != "" {
				fmt.Fprintf(w, "    → %s\n", f)
			}
		}
	}
	if n := countFailed(lines); n > 0 {
		fmt.Fprintf(w, "%d of %d checks failed.\n", n, len(lines))
	} else {
		fmt.Fprintf(w, "all %d checks passed.\n", len(lines))
	}
}

func (d *doctor) checkConfig(context.Context) []checkLine {
	if len(d.roles) == 0 {
		return []checkLine{fail("config: sets none of matrix.homeserver_url, database.url, actuator.ssh_key_file or mcp.url, so it is for no role",
			"pass the config a role runs with, or name the roles to check with -roles")}
	}
	var lines []checkLine
	for _, r := range d.roles {
		err := d.cfg.Validate(r)
		if err == nil {
			continue
		}
		// The first line is the heading; the rest name a key each.
		problems := strings.Split(err.Error(), "\n")
		fix := make([]string, 0, len(problems))
		for _, p := range problems[1:] {
			fix = append(fix, strings.TrimSpace(p))
		}
		lines = append(lines, fail("config: not valid for "+r, strings.Join(fix, "\n")))
	}
	if len(lines) == 0 {
		lines = append(lines, pass("config: valid for "+strings.Join(d.roles, ", ")))
	}
	return lines
}

func (d *doctor) checkPostgres(ctx context.Context) []checkLine {
	latest, err := store.LatestVersion()
	if err != nil {
		return []checkLine{fail("postgres: cannot read this build's migrations: "+err.Error(), "rebuild nomos")}
	}
	v, err := store.SchemaVersion(ctx, d.cfg.Database.URL)
	switch {
	case err != nil:
		return []checkLine{fail("postgres: cannot connect to "+config.RedactURL(d.cfg.Database.URL)+": "+err.Error(),
			"start Postgres, or correct database.url: the database must exist and its role must be able to log in")}
	case v < latest:
		return []checkLine{fail(fmt.Sprintf("postgres: the schema is at version %d; this nomos needs %d", v, latest),
			"take a backup (pg_dump), then run `nomos migrate` with this config")}
	case v > latest:
		return []checkLine{fail(fmt.Sprintf("postgres: the schema is at version %d, newer than this nomos knows (%d)", v, latest),
			"run the nomos release that migrated it, or a newer one")}
	}
	return []checkLine{pass(fmt.Sprintf("postgres: reachable, schema at version %d (the newest)", v))}
}

func (d *doctor) checkRedis(ctx context.Context) []checkLine {
	opt, err := tasks.ParseRedisURL(d.cfg.Redis.URL)
	if err != nil {
		return []checkLine{fail("redis: redis.url is not a Redis URL: "+err.Error(), "set redis.url to redis://HOST:PORT/DB")}
	}
	c, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return []checkLine{fail("redis: cannot make a client for "+config.RedactURL(d.cfg.Redis.URL), "set redis.url to redis://HOST:PORT/DB")}
	}
	defer c.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pingCtx).Err(); err != nil {
		return []checkLine{fail("redis: cannot reach "+config.RedactURL(d.cfg.Redis.URL)+": "+err.Error(),
			"start Redis, or set redis.url to where it listens: the bot and the actuator talk only through it")}
	}
	return []checkLine{pass("redis: reachable at " + config.RedactURL(d.cfg.Redis.URL))}
}
