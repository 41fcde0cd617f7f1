package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"golang.org/x/crypto/ssh"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/signatures"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/mcpserver/proxy"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// devConfigPath is where `nomos dev` writes the config it runs the roles
// with; `nomos doctor` without -config checks that stack.
var devConfigPath = filepath.Join(".nomos-dev", "nomos.yaml")

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
	path := env.configPath
	if path == "" {
		if _, err := os.Stat(devConfigPath); err == nil {
			path = devConfigPath
		}
	}
	cfg, err := loadConfig(path, env.environ)
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
func configRoles(cfg *Config) []string {
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
	cfg    *Config
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

func newDoctor(cfg *Config, roles []string, logger *slog.Logger) *doctor {
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
		{c.Matrix.HomeserverURL != "", doctorCheck{"matrix", d.checkMatrix}},
		{c.Orders.SigningKeyFile != "" || c.Orders.VerifyKeyFile != "", doctorCheck{"order keys", d.checkOrderKeys}},
		{c.Reports.SigningKeyFile != "" || c.Reports.VerifyKeyFile != "", doctorCheck{"report keys", d.checkReportKeys}},
		{c.Actuator.SSHKeyFile != "" || c.Actuator.KnownHostsFile != "", doctorCheck{"ssh", d.checkSSH}},
		{d.hasRole("bot") && c.Database.URL != "", doctorCheck{"hosts", d.checkHosts}},
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
		err := d.cfg.validate(r)
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
		return []checkLine{fail("postgres: cannot connect to "+redactURL(d.cfg.Database.URL)+": "+err.Error(),
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
	opt, err := asynq.ParseRedisURI(d.cfg.Redis.URL)
	if err != nil {
		return []checkLine{fail("redis: redis.url is not a Redis URL: "+err.Error(), "set redis.url to redis://HOST:PORT/DB")}
	}
	c, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return []checkLine{fail("redis: cannot make a client for "+redactURL(d.cfg.Redis.URL), "set redis.url to redis://HOST:PORT/DB")}
	}
	defer c.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pingCtx).Err(); err != nil {
		return []checkLine{fail("redis: cannot reach "+redactURL(d.cfg.Redis.URL)+": "+err.Error(),
			"start Redis, or set redis.url to where it listens: the bot and the actuator talk only through it")}
	}
	return []checkLine{pass("redis: reachable at " + redactURL(d.cfg.Redis.URL))}
}

// checkMatrix checks, in turn, that the homeserver answers, that the bot
// can log in, that it is in the ops room and that its device is
// cross-signed. A step that fails ends the check, since the later ones
// depend on it.
func (d *doctor) checkMatrix(ctx context.Context) []checkLine {
	m := d.cfg.Matrix
	hs, err := mautrix.NewClient(m.HomeserverURL, "", "")
	if err != nil {
		return []checkLine{fail("homeserver: "+err.Error(), "set matrix.homeserver_url to the homeserver's client URL, such as https://matrix.example.org")}
	}
	hs.Log = zerolog.Nop()
	versions, err := hs.Versions(ctx)
	if err != nil || len(versions.Versions) == 0 {
		return []checkLine{fail(fmt.Sprintf("homeserver: %s does not answer GET /_matrix/client/versions: %v", m.HomeserverURL, err),
			"start the homeserver, or set matrix.homeserver_url to its client URL (what Element's sign-in asks for)")}
	}
	lines := []checkLine{pass(fmt.Sprintf("homeserver: %s answers (Matrix %s)", m.HomeserverURL, versions.Versions[len(versions.Versions)-1]))}

	cli, how, err := d.login(ctx)
	if err != nil {
		fix := "check matrix.user_id and matrix.password (or matrix.password_file) against the homeserver"
		if m.AccessToken != "" {
			fix = "matrix.access_token is not valid for " + m.UserID + ": log in again and store the new token"
		}
		return append(lines, fail(fmt.Sprintf("matrix login: %s cannot log in with %s: %v", m.UserID, how, err), fix))
	}
	lines = append(lines, pass(fmt.Sprintf("matrix login: %s logs in with %s", m.UserID, how)))

	if m.OpsRoom == "" {
		lines = append(lines, pass("ops room: none set (matrix.ops_room): the bot answers where operators invite it, but has nowhere to post alerts and MCP requests"))
	} else if rooms, err := cli.JoinedRooms(ctx); err != nil {
		lines = append(lines, fail("ops room: cannot list the bot's rooms: "+err.Error(), "try again; the homeserver's log says why it failed"))
	} else if !slices.Contains(rooms.JoinedRooms, id.RoomID(m.OpsRoom)) {
		lines = append(lines, fail(fmt.Sprintf("ops room: %s is not joined to %s", m.UserID, m.OpsRoom),
			"invite "+m.UserID+" to the room from an operator's account (matrix.operators): the running bot joins by itself\ncheck that matrix.ops_room is the room's id (Element: room settings, Advanced)"))
	} else {
		lines = append(lines, pass(fmt.Sprintf("ops room: %s is joined to %s", m.UserID, m.OpsRoom)))
	}
	if d.cfg.Database.URL != "" {
		lines = append(lines, d.checkDevice(ctx, cli))
	}
	return lines
}

// doctorDeviceID is the device the doctor logs in as; it logs out again
// when done, which removes it.
const doctorDeviceID = id.DeviceID("NOMOSDOCTOR")

// login logs in as the bot, once per doctor run: with the access token
// (whoami, no new device) or the password (a device of the doctor's own,
// never the bot's, whose session it would end).
func (d *doctor) login(ctx context.Context) (*mautrix.Client, string, error) {
	m := d.cfg.Matrix
	how := "matrix.password"
	if m.AccessToken != "" {
		how = "matrix.access_token"
	}
	if d.session != nil {
		return d.session, how, nil
	}
	cli, err := mautrix.NewClient(m.HomeserverURL, id.UserID(m.UserID), m.AccessToken)
	if err != nil {
		return nil, how, err
	}
	cli.Log = zerolog.Nop()
	if m.AccessToken != "" {
		who, err := cli.Whoami(ctx)
		if err != nil {
			return nil, how, err
		}
		if who.UserID != id.UserID(m.UserID) {
			return nil, how, fmt.Errorf("the token belongs to %s", who.UserID)
		}
	} else {
		_, err = cli.Login(ctx, &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypePassword,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: m.UserID},
			Password:                 m.Password,
			DeviceID:                 doctorDeviceID,
			InitialDeviceDisplayName: "nomos doctor",
			StoreCredentials:         true,
		})
		if err != nil {
			return nil, how, err
		}
	}
	d.session = cli
	return cli, how, nil
}

// checkDevice checks the bot's own device: the crypto store in Postgres
// opens with matrix.pickle_key, the homeserver has that device's keys,
// and the bot's self-signing key, itself signed by its master key, has
// signed them. That is what Element calls a verified session.
func (d *doctor) checkDevice(ctx context.Context, cli *mautrix.Client) checkLine {
	m := d.cfg.Matrix
	db, err := dbutil.NewWithDialect(d.cfg.Database.URL, "pgx")
	if err != nil {
		return fail("bot device: cannot open the crypto store: "+err.Error(), "correct database.url")
	}
	defer db.Close()
	cs := crypto.NewSQLCryptoStore(db, dbutil.NoopLogger, "", "", []byte(m.PickleKey))
	deviceID, err := cs.FindDeviceID(ctx)
	var pgErr *pgconn.PgError
	noTable := errors.As(err, &pgErr) && pgErr.Code == "42P01"
	if noTable || err == nil && deviceID == "" {
		return fail("bot device: the bot has no device yet", "start `nomos bot` once: it creates its device and cross-signing keys")
	}
	if err != nil {
		return fail("bot device: cannot read the crypto store: "+err.Error(), "check database.url; the bot keeps its device in that database")
	}
	acct, err := cs.GetAccount(ctx)
	if err != nil || acct == nil {
		return fail(fmt.Sprintf("bot device: the end-to-end keys of device %s do not open with matrix.pickle_key: %v", deviceID, err),
			"set matrix.pickle_key (or pickle_key_file) back to the key the bot first ran with\nif it is lost, the bot needs a new device: make a new, empty database for it (nomos migrate and seed), then start it; its recovery key (matrix.recovery_key_file) verifies the new device\nfor the dev stack: nomos dev -reset")
	}
	ownKey, _, err := acct.Internal.IdentityKeys()
	if err != nil {
		return fail("bot device: cannot read the device's keys: "+err.Error(), "restart the bot; its log says more")
	}
	userID := id.UserID(m.UserID)
	keys, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{userID: mautrix.DeviceIDList{}}})
	if err != nil {
		return fail("bot device: cannot query the bot's keys: "+err.Error(), "try again; the homeserver's log says why it failed")
	}
	dev, ok := keys.DeviceKeys[userID][deviceID]
	if !ok {
		return fail(fmt.Sprintf("bot device: the homeserver has no keys for the bot's device %s", deviceID),
			"start `nomos bot`: it uploads its device keys at start\nif the homeserver was reset while the bot's database was kept, give the bot a new database (for the dev stack: nomos dev -reset)")
	}
	if dev.Keys.GetEd25519(deviceID) != ownKey {
		return fail(fmt.Sprintf("bot device: the homeserver's keys for device %s are not the keys in the bot's database", deviceID),
			"another client logged in as the bot with the same device id: log it out, then restart the bot")
	}
	notSigned := "start `nomos bot` with matrix.password and matrix.recovery_key_file set: it creates or reuses its cross-signing keys and signs its device\nor verify the session in Element: the bot's profile, Sessions, Verify"
	master, hasMaster := keys.MasterKeys[userID]
	selfSigning, hasSelf := keys.SelfSigningKeys[userID]
	if !hasMaster || !hasSelf {
		return fail(fmt.Sprintf("bot device: %s has no cross-signing keys, so Element shows device %s as unverified", m.UserID, deviceID), notSigned)
	}
	masterKey, sskKey := master.FirstKey(), selfSigning.FirstKey()
	if ok, _ := signatures.VerifySignatureJSON(selfSigning, userID, masterKey.String(), masterKey); !ok {
		return fail("bot device: the bot's self-signing key is not signed by its master key", notSigned)
	}
	if ok, _ := signatures.VerifySignatureJSON(&dev, userID, sskKey.String(), sskKey); !ok {
		return fail(fmt.Sprintf("bot device: %s is not cross-signed, so Element shows it as unverified", deviceID), notSigned)
	}
	return pass(fmt.Sprintf("bot device: %s opens with matrix.pickle_key and is cross-signed", deviceID))
}

func (d *doctor) checkOrderKeys(context.Context) []checkLine {
	return []checkLine{checkKeyPair("order keys", "orders", d.cfg.Orders.SigningKeyFile, d.cfg.Orders.VerifyKeyFile, "the actuator would refuse every order and probe")}
}

func (d *doctor) checkReportKeys(context.Context) []checkLine {
	return []checkLine{checkKeyPair("report keys", "reports", d.cfg.Reports.SigningKeyFile, d.cfg.Reports.VerifyKeyFile, "the bot would refuse every result and probe result")}
}

// checkKeyPair loads whichever halves of an Ed25519 pair are on this
// machine and, when both are, signs a nonce with one and verifies it with
// the other.
func checkKeyPair(label, prefix, signingFile, verifyFile, consequence string) checkLine {
	signKey, verifyKey := prefix+".signing_key_file", prefix+".verify_key_file"
	var priv ed25519.PrivateKey
	var pub ed25519.PublicKey
	var err error
	if signingFile != "" {
		if priv, err = tasks.LoadSigningKey(signingFile); err != nil {
			return fail(label+": "+signKey+": "+err.Error(), "point "+signKey+" at an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519 -out FILE)")
		}
	}
	if verifyFile != "" {
		if pub, err = tasks.LoadVerifyKey(verifyFile); err != nil {
			return fail(label+": "+verifyKey+": "+err.Error(), "point "+verifyKey+" at the public half of "+signKey+" (openssl pkey -in SIGNING_KEY -pubout -out FILE)")
		}
	}
	switch {
	case priv == nil:
		return pass(label + ": " + verifyKey + " loads; its signing half is on the other side")
	case pub == nil:
		return pass(label + ": " + signKey + " loads; its verify half is on the other side")
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	if !ed25519.Verify(pub, nonce, ed25519.Sign(priv, nonce)) {
		return fail(fmt.Sprintf("%s: %s and %s are not a pair: %s", label, signKey, verifyKey, consequence),
			fmt.Sprintf("write the public half of the signing key to the verify key file: openssl pkey -in %s -pubout -out %s", signingFile, verifyFile))
	}
	return pass(fmt.Sprintf("%s: %s and %s are a pair", label, signKey, verifyKey))
}

// checkSSH checks the actuator's SSH material: its key loads without a
// passphrase and known_hosts pins at least one host key.
func (d *doctor) checkSSH(context.Context) []checkLine {
	a := d.cfg.Actuator
	var lines []checkLine
	if a.SSHKeyFile != "" {
		signer, err := loadSSHKey(a.SSHKeyFile)
		if err != nil {
			lines = append(lines, fail("ssh key: "+err.Error(), "point actuator.ssh_key_file at a private key without a passphrase (ssh-keygen -t ed25519 -N '' -f FILE)"))
		} else {
			lines = append(lines, pass(fmt.Sprintf("ssh key: %s loads (%s %s)", a.SSHKeyFile, signer.PublicKey().Type(), ssh.FingerprintSHA256(signer.PublicKey()))))
		}
	}
	if a.KnownHostsFile != "" {
		n, err := countKnownHosts(a.KnownHostsFile)
		pin := "pin each host's key: ssh-keyscan -p PORT HOST >> " + a.KnownHostsFile + ", after checking its fingerprint (ssh-keygen -lf) against the one the host shows"
		switch {
		case err != nil:
			lines = append(lines, fail("known_hosts: "+err.Error(), pin))
		case n == 0:
			lines = append(lines, fail("known_hosts: "+a.KnownHostsFile+" pins no host key, so the actuator reaches no host", pin))
		default:
			lines = append(lines, pass(fmt.Sprintf("known_hosts: %s pins %d host keys", a.KnownHostsFile, n)))
		}
	}
	return lines
}

func countKnownHosts(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for len(data) > 0 {
		var rest []byte
		_, _, _, _, rest, err = ssh.ParseKnownHosts(data)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		n++
		data = rest
	}
	return n, nil
}

// probeUnreachable opens the detail of a probe the actuator could not
// get to the host (actuator/probe.go): no connection, a refused host key,
// a session that broke.
const probeUnreachable = "the probe could not run:"

// checkHosts reports, for every host, whether the actuator reaches it.
// The doctor holds no SSH key and sends nothing itself: the prober already
// runs a check through every host on its schedule, signed like an order,
// and the actuator's signed results land in Postgres, so the newest
// result per host is the answer.
func (d *doctor) checkHosts(ctx context.Context) []checkLine {
	st, err := store.Open(ctx, store.Config{URL: d.cfg.Database.URL, MaxConns: 2, Logger: d.logger})
	if err != nil {
		return []checkLine{fail("hosts: cannot open the database: "+err.Error(), "see the postgres line")}
	}
	defer st.Close()
	hosts, err := st.HostProbes(ctx)
	if err != nil {
		return []checkLine{fail("hosts: cannot read the fleet: "+err.Error(), "run `nomos migrate` with this config")}
	}
	if len(hosts) == 0 {
		return []checkLine{fail("hosts: the fleet has no hosts", "describe your hosts in the seed files and run `nomos seed` (seeds.dir)")}
	}
	now := d.now()
	var lines []checkLine
	for _, h := range hosts {
		name := "host " + h.Name
		if h.SSH != "" {
			name += " (" + h.SSH + ")"
		}
		switch {
		case h.SSH == "":
			lines = append(lines, fail(name+": has no ssh address in the fleet data", "set ssh: HOST:22 for it in the seed files and run `nomos seed`"))
		case h.Checks == 0:
			lines = append(lines, fail(name+": no enabled check runs through it, so nothing shows the actuator reaches it",
				"add a check on the host or one of its containers to the seed files, such as {slug: "+h.Name+"-disk, target: "+h.Slug+", kind: disk}, and run `nomos seed`"))
		case h.At == nil:
			lines = append(lines, fail(name+": no probe result yet",
				"start the bot (checks.enabled) and the actuator with the same redis.url and actuator.name; the first results come within seconds"))
		case now.Sub(*h.At) > store.StaleAfter*h.MinInterval:
			lines = append(lines, fail(fmt.Sprintf("%s: the newest probe result is %s old", name, humantime.Duration(now.Sub(*h.At))),
				"is the actuator running, with the same redis.url and actuator.name as the bot? its log says why probes stopped"))
		case strings.HasPrefix(h.Detail, probeUnreachable):
			fix := "check the address, that sshd runs on the host, and that the actuator's key is in its authorized_keys"
			if strings.Contains(h.Detail, "host key") || strings.Contains(h.Detail, "known_hosts") {
				fix = "pin the host's key in the actuator's known_hosts after checking its fingerprint on the host (ssh-keyscan, ssh-keygen -lf)"
			}
			lines = append(lines, fail(fmt.Sprintf("%s: the actuator cannot reach it (%s, %s ago): %s", name, h.Check, humantime.Duration(now.Sub(*h.At)), strings.TrimSpace(strings.TrimPrefix(h.Detail, probeUnreachable))), fix))
		default:
			lines = append(lines, pass(fmt.Sprintf("%s: the actuator reaches it with its pinned key (probe %s, %s ago: %s)", name, h.Check, humantime.Duration(now.Sub(*h.At)), h.Health)))
		}
	}
	return lines
}

// checkLLM asks the endpoint for its models, with the bot's key and
// headers, and looks for llm.model among them.
func (d *doctor) checkLLM(ctx context.Context) []checkLine {
	l := d.cfg.LLM
	endpoint := strings.TrimRight(l.BaseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return []checkLine{fail("llm: "+err.Error(), "set llm.base_url to the endpoint's OpenAI-compatible base URL, such as https://openrouter.ai/api/v1")}
	}
	for k, v := range l.Headers {
		req.Header.Set(k, v)
	}
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return []checkLine{fail("llm: "+endpoint+" does not answer: "+err.Error(), "check llm.base_url, and that this machine can reach it")}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return []checkLine{fail(fmt.Sprintf("llm: %s refuses llm.api_key (%s)", endpoint, resp.Status), "set llm.api_key (or llm.api_key_file) to a key the endpoint accepts")}
	case resp.StatusCode != http.StatusOK:
		return []checkLine{fail(fmt.Sprintf("llm: GET %s answered %s: %s", endpoint, resp.Status, bytes.TrimSpace(body[:min(len(body), 200)])),
			"check llm.base_url: it is the part before /chat/completions")}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return []checkLine{pass(fmt.Sprintf("llm: %s answers; it lists no models, so llm.model %s is not confirmed", endpoint, l.Model))}
	}
	for _, m := range list.Data {
		if m.ID == l.Model {
			return []checkLine{pass(fmt.Sprintf("llm: %s answers and offers %s", endpoint, l.Model))}
		}
	}
	return []checkLine{fail(fmt.Sprintf("llm: %s does not offer llm.model %s among its %d models", endpoint, l.Model, len(list.Data)),
		"set llm.model to a model id it lists (GET "+endpoint+")")}
}

// checkMCP checks the tokens this machine's config holds: the bot's
// mcp.tokens are well formed, the client token is long enough and, when
// both sides are here, one the bot accepts; and the bot's endpoint takes
// the client token.
func (d *doctor) checkMCP(ctx context.Context) []checkLine {
	m := d.cfg.MCP
	var lines []checkLine
	names := map[[32]byte]string{}
	var bad []string
	for i, t := range m.Tokens {
		sum, err := mcpserver.ParseTokenHash(t.TokenSHA256)
		if err != nil {
			bad = append(bad, fmt.Sprintf("mcp.tokens[%d] (%s): %v", i, t.Name, err))
			continue
		}
		names[sum] = t.Name
	}
	if m.Token != "" {
		if len(m.Token) < mcpserver.MinTokenLength {
			bad = append(bad, fmt.Sprintf("mcp.token is shorter than %d characters", mcpserver.MinTokenLength))
		}
		names[mcpserver.HashToken(m.Token)] = mcpserver.LegacyTokenName
	}
	switch {
	case len(bad) > 0:
		lines = append(lines, fail("mcp tokens: "+strings.Join(bad, "; "), "make each token with `nomos mcp token NAME` and paste the line it prints under mcp.tokens"))
	case len(m.Tokens) > 0 || m.Token != "":
		text := fmt.Sprintf("mcp tokens: %d well formed", len(names))
		if m.Token != "" {
			text += " (mcp.token is deprecated: move it to mcp.tokens)"
		}
		lines = append(lines, pass(text))
	}
	if m.ClientToken == "" && m.URL == "" {
		return lines
	}
	if len(m.ClientToken) < mcpserver.MinTokenLength {
		return append(lines, fail(fmt.Sprintf("mcp client: mcp.client_token is shorter than %d characters", mcpserver.MinTokenLength),
			"make one with `nomos mcp token NAME`, add its line to the bot's mcp.tokens, and put the token in mcp.client_token_file"))
	}
	if len(names) > 0 {
		name, ok := names[mcpserver.HashToken(m.ClientToken)]
		if !ok {
			return append(lines, fail("mcp client: mcp.client_token is none of the tokens in mcp.tokens, so the bot would refuse it",
				"add the client's token to mcp.tokens (as the line `nomos mcp token NAME` prints), or correct mcp.client_token_file"))
		}
		lines = append(lines, pass("mcp client: mcp.client_token is the token named "+name))
	}
	if m.URL == "" {
		return lines
	}
	p, err := proxy.New(ctx, proxy.Config{URL: m.URL, Token: m.ClientToken, Version: version, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return append(lines, fail("mcp: the bot at "+m.URL+" does not take the client token: "+err.Error(),
			"start the bot with the client's token in its mcp.tokens, and set mcp.url to its web.listen address plus /mcp"))
	}
	n := len(p.Tools())
	p.Close()
	return append(lines, pass(fmt.Sprintf("mcp: the bot at %s takes the client token (%d tools)", m.URL, n)))
}

// checkWeb checks that the bot's status page is served where web.listen
// says, and its /healthz when it has one.
func (d *doctor) checkWeb(ctx context.Context) []checkLine {
	base := publicURL(d.cfg.Web.Listen)
	if base == "" {
		return []checkLine{fail("status page: web.listen "+d.cfg.Web.Listen+" is not host:port", "set web.listen, such as 127.0.0.1:8080")}
	}
	notUp := "start `nomos bot`: it serves the status page on web.listen (" + d.cfg.Web.Listen + "); if it runs, its log says why it could not listen"
	status, body, err := d.get(ctx, base, true)
	found := "answers"
	switch {
	case err != nil:
		return []checkLine{fail("status page: nothing answers at "+base+": "+err.Error(), notUp)}
	case status == http.StatusUnauthorized && d.cfg.Web.Auth.User == "":
		found = "answers and asks for a password"
	case status == http.StatusUnauthorized:
		return []checkLine{fail("status page: "+base+" refuses web.auth's user and password", "the bot and this config disagree on web.auth: restart the bot with this config")}
	case status != http.StatusOK:
		return []checkLine{fail(fmt.Sprintf("status page: %s answers %d", base, status), notUp)}
	case !strings.Contains(body, "· Nomos</title>") && !strings.Contains(body, "Nomos status"):
		return []checkLine{fail("status page: something other than the bot answers at "+base, "stop what listens on "+d.cfg.Web.Listen+", or move web.listen")}
	}
	// A bot from before /healthz answers 404 there.
	switch status, _, err := d.get(ctx, base+"healthz", false); {
	case err != nil:
		return []checkLine{fail("status page: "+base+"healthz does not answer: "+err.Error(), notUp)}
	case status == http.StatusOK:
		found += "; /healthz answers 200"
	case status != http.StatusNotFound:
		return []checkLine{fail(fmt.Sprintf("status page: %shealthz answers %d", base, status), "the bot's log says what is unhealthy")}
	}
	return []checkLine{pass("status page: " + base + " " + found)}
}

func (d *doctor) get(ctx context.Context, u string, auth bool) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if a := d.cfg.Web.Auth; auth && a.User != "" {
		req.SetBasicAuth(a.User, a.Password)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), nil
}

// urlPassword is the password embedded in a URL, if any.
func urlPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}
