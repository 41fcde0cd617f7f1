package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/nomoshq/nomos/internal/testenv"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

// failover is two `nomos bot` processes, one actuator and an operator in
// a room, against one database.
type failover struct {
	ctx      context.Context
	bin, dir string
	env      []string
	fleet    *testenv.Fleet
	store    *store.Store
	dbURL    string
	logs     map[*exec.Cmd]string // each process's log file
	bot, op  *testenv.MatrixUser
	room     id.RoomID
	metrics  string // the actuator's /metrics
	// startActuator starts the actuator again after stopActuator.
	startActuator func()
	stopActuator  func()
}

func setupFailover(t *testing.T) *failover {
	t.Helper()
	f := &failover{ctx: testenv.Context(t), bin: buildNomos(t), dir: t.TempDir(), fleet: testenv.NewFleet(t), logs: map[*exec.Cmd]string{}}
	dbURL := testenv.DatabaseURL(t)
	f.dbURL = dbURL
	st, err := store.Open(f.ctx, store.Config{URL: dbURL, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	f.store = st
	if _, err := st.ApplySeed(f.ctx, f.fleet.Seed); err != nil {
		t.Fatal(err)
	}
	orders, ordersPub := filepath.Join(f.dir, "orders.key"), filepath.Join(f.dir, "orders.pub")
	reports, reportsPub := filepath.Join(f.dir, "reports.key"), filepath.Join(f.dir, "reports.pub")
	for _, pair := range [][2]string{{orders, ordersPub}, {reports, reportsPub}} {
		if err := tasks.GenerateKeyFiles(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	f.bot = testenv.NewMatrixUser(t, "nomos")
	f.op = testenv.NewMatrixUser(t, "operator")
	resp, err := f.op.Client.CreateRoom(f.ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "ops", Invite: []id.UserID{f.bot.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	f.room = resp.RoomID
	redisURL := testenv.RedisURL(t)
	f.env = append(os.Environ(),
		"NOMOS_DATABASE__URL="+dbURL, "NOMOS_REDIS__URL="+redisURL,
		"NOMOS_MATRIX__HOMESERVER_URL="+testenv.Homeserver(t).URL(), "NOMOS_MATRIX__USER_ID="+f.bot.UserID.String(),
		"NOMOS_MATRIX__PASSWORD="+f.bot.Password, "NOMOS_MATRIX__OPERATORS="+f.op.UserID.String(),
		"NOMOS_MATRIX__OPS_ROOM="+f.room.String(), "NOMOS_MATRIX__PICKLE_KEY=failover test pickle key 0123",
		// The operator speaks plain Matrix, in a room in the clear.
		"NOMOS_APPROVALS__REQUIRE_VERIFIED_DEVICE=false",
		"NOMOS_MATRIX__RECOVERY_KEY_FILE="+filepath.Join(f.dir, "recovery_key"),
		"NOMOS_ORDERS__SIGNING_KEY_FILE="+orders, "NOMOS_REPORTS__VERIFY_KEY_FILE="+reportsPub,
		"NOMOS_CHECKS__ENABLED=false", "NOMOS_INVENTORY__INTERVAL=0s",
		"NOMOS_ACTUATOR__SSH_KEY_FILE="+f.fleet.SSHKeyFile, "NOMOS_ACTUATOR__KNOWN_HOSTS_FILE="+f.fleet.KnownHostsFile,
		"NOMOS_ACTUATOR__JOURNAL_FILE="+filepath.Join(f.dir, "journal"),
		"NOMOS_ORDERS__VERIFY_KEY_FILE="+ordersPub, "NOMOS_REPORTS__SIGNING_KEY_FILE="+reports,
	)
	metricsPort := strconv.Itoa(testenv.FreePort(t))
	f.metrics = "http://127.0.0.1:" + metricsPort + "/metrics"
	var act *exec.Cmd
	f.startActuator = func() { act = f.start(t, "actuator", "NOMOS_ACTUATOR__METRICS_LISTEN=:"+metricsPort) }
	f.stopActuator = func() { stopProcess(act) }
	f.startActuator()
	t.Cleanup(func() { f.stopActuator() })
	return f
}

// start runs `nomos role` with the shared environment and extra; its
// output goes to a file that is shown if the test fails.
func (f *failover) start(t *testing.T, role string, extra ...string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(f.dir, fmt.Sprintf("%s-%d.log", role, time.Now().UnixNano()))
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.bin, role)
	cmd.Env = append(append([]string{}, f.env...), extra...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.logs[cmd] = logPath
	t.Cleanup(func() {
		_ = out.Close() // the role wrote its log through its own descriptor
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", role, data)
		}
	})
	return cmd
}

// logged says whether cmd's log has a line containing text.
func (f *failover) logged(cmd *exec.Cmd, text string) bool {
	data, _ := os.ReadFile(f.logs[cmd])
	return strings.Contains(string(data), text)
}

func stopProcess(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// startBot runs a bot whose status page listens on a port of its own and
// returns it with that page's /readyz address.
func (f *failover) startBot(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	port := testenv.FreePort(t)
	cmd := f.start(t, "bot", fmt.Sprintf("NOMOS_WEB__LISTEN=127.0.0.1:%d", port))
	t.Cleanup(func() { stopProcess(cmd) })
	return cmd, fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
}

// readyChecks reads a bot's /readyz checks; nil while it does not answer.
func readyChecks(addr string) map[string]string {
	resp, err := http.Get(addr)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var rep struct {
		Checks map[string]string `json:"checks"`
	}
	if body, err := io.ReadAll(resp.Body); err != nil || json.Unmarshal(body, &rep) != nil {
		return nil
	}
	return rep.Checks
}

// leadsAndSyncs says whether the bot at addr leads and its /sync answers.
func leadsAndSyncs(addr string) bool {
	c := readyChecks(addr)
	return c["leader"] == "ok" && c["homeserver_sync"] == "ok"
}

// until polls cond until it holds, failing the test after a minute.
func (f *failover) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// botEvents lists the bot's messages in the room, oldest first.
func (f *failover) botEvents(t *testing.T) []*event.Event {
	t.Helper()
	resp, err := f.op.Client.Messages(f.ctx, f.room, "", "", mautrix.DirectionBackward, nil, 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []*event.Event
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		e := resp.Chunk[i]
		_ = e.Content.ParseRaw(e.Type)
		if e.Sender == f.bot.UserID && e.Type == event.EventMessage {
			out = append(out, e)
		}
	}
	return out
}

// newCard waits for a card the bot posts for a plan not in seen.
func (f *failover) newCard(t *testing.T, seen map[string]bool) *event.Event {
	t.Helper()
	var card *event.Event
	f.until(t, "the bot posts a new card", func() bool {
		for _, e := range f.botEvents(t) {
			x, _ := e.Content.Raw[cardKeyForTest].(string)
			if x != "" && !seen[x] && e.Content.AsMessage().RelatesTo.GetReplaceID() == "" {
				seen[x] = true
				card = e
				return true
			}
		}
		return false
	})
	return card
}

// cardKeyForTest is bot.cardKey: the execution id every card carries.
const cardKeyForTest = "io.nomos.execution"

func (f *failover) approve(t *testing.T, card *event.Event) {
	t.Helper()
	if _, err := f.op.Client.SendReaction(f.ctx, f.room, card.ID, "✅"); err != nil {
		t.Fatal(err)
	}
}

func (f *failover) say(t *testing.T, text string) {
	t.Helper()
	if _, err := f.op.Client.SendText(f.ctx, f.room, text); err != nil {
		t.Fatal(err)
	}
}

// succeeded waits until the execution card shows has succeeded.
func (f *failover) succeeded(t *testing.T, card *event.Event) {
	f.reaches(t, card, store.StateSucceeded)
}

// reaches waits until the execution card shows is in state.
func (f *failover) reaches(t *testing.T, card *event.Event, state store.ExecutionState) {
	t.Helper()
	xid := card.Content.Raw[cardKeyForTest].(string)
	f.until(t, "execution "+xid+" is "+string(state), func() bool {
		xs, err := f.store.ListExecutions(f.ctx, store.ExecutionFilter{})
		if err != nil {
			return false
		}
		for _, x := range xs {
			if x.ID.String() == xid {
				return x.State == state
			}
		}
		return false
	})
}

// TestBotFailover runs two bots on one database. One leads; the other
// stands by and says so on /readyz. The leader is SIGKILLed right after
// an operator approves a plan: the standby takes over, the plan runs once,
// and a new plan works end to end. Then the new leader is SIGKILLed with
// an order sent and not yet run: a third bot takes over and applies its
// result. Last, the leader's lock connection is cut while it and a
// standby both live: it stops, and one of them leads. No card is posted
// twice and no order reaches the actuator twice.
func TestBotFailover(t *testing.T) {
	f := setupFailover(t)
	const restart = "pct exec 101 -- systemctl restart jellyfin.service"

	leader, readyA := f.startBot(t)
	f.until(t, "the first bot leads and syncs", func() bool { return leadsAndSyncs(readyA) })
	second, readyB := f.startBot(t)
	f.until(t, "the second bot stands by", func() bool {
		c := readyChecks(readyB)
		return c["leader"] == "standby" && c["homeserver_sync"] == "standby"
	})
	f.until(t, "the bot joins the room", func() bool {
		members, err := f.op.Client.JoinedMembers(f.ctx, f.room)
		_, ok := members.Joined[f.bot.UserID]
		return err == nil && ok
	})

	seen := map[string]bool{}
	f.say(t, "restart jellyfin")
	first := f.newCard(t, seen)
	f.approve(t, first)
	f.succeeded(t, first)

	// Approve, then kill the leader at once: whether it handled the
	// approval or not, the standby must finish the job, once.
	f.say(t, "restart jellyfin")
	card2 := f.newCard(t, seen)
	f.approve(t, card2)
	kill(t, leader)
	killed := time.Now()
	f.until(t, "the standby leads and syncs", func() bool { return leadsAndSyncs(readyB) })
	t.Logf("the standby led and synced %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	f.succeeded(t, card2)

	// The new leader serves a new request end to end.
	f.say(t, "restart jellyfin")
	card3 := f.newCard(t, seen)
	f.approve(t, card3)
	f.succeeded(t, card3)

	// The new leader dies with an order on the queue that has not run: the
	// next leader must neither lose its result nor send it again.
	third, readyC := f.startBot(t)
	f.until(t, "a third bot stands by", func() bool { return readyChecks(readyC)["leader"] == "standby" })
	f.noReplays(t)
	f.stopActuator()
	f.say(t, "restart jellyfin")
	card4 := f.newCard(t, seen)
	f.approve(t, card4)
	f.reaches(t, card4, store.StateDispatched)
	kill(t, second)
	killed = time.Now()
	f.until(t, "the third bot leads and syncs", func() bool { return leadsAndSyncs(readyC) })
	t.Logf("the third bot led and synced %s after the second was killed", time.Since(killed).Round(time.Millisecond))
	f.startActuator()
	f.succeeded(t, card4)
	f.until(t, "the last card shows its result", func() bool {
		for _, e := range f.botEvents(t) {
			m := e.Content.AsMessage()
			if m.RelatesTo.GetReplaceID() == card4.ID && m.NewContent != nil && strings.Contains(m.NewContent.Body, "succeeded") {
				return true
			}
		}
		return false
	})

	// Both bots alive, and the leader's lock connection is cut: it stops
	// and stands by, and one of the two leads; a new plan gets one card.
	_, readyD := f.startBot(t)
	f.until(t, "a fourth bot stands by", func() bool { return readyChecks(readyD)["leader"] == "standby" })
	f.cutLeaderLock(t)
	f.until(t, "the leader stops its services", func() bool { return f.logged(third, "stopping the leader's work") })
	f.until(t, "one bot leads and syncs again", func() bool {
		c, d := readyChecks(readyC), readyChecks(readyD)
		return leadsAndSyncs(readyC) && d["leader"] == "standby" || leadsAndSyncs(readyD) && c["leader"] == "standby"
	})
	if leadsAndSyncs(readyC) {
		t.Log("after the cut the same bot leads again, its services restarted")
	} else {
		t.Log("after the cut the standby leads")
	}
	f.say(t, "restart jellyfin")
	card5 := f.newCard(t, seen)
	f.approve(t, card5)
	f.succeeded(t, card5)

	xs, err := f.store.ListExecutions(f.ctx, store.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 5 {
		t.Errorf("%d executions, want one per request (5)", len(xs))
	}
	cards := map[string]int{}
	for _, e := range f.botEvents(t) {
		if x, _ := e.Content.Raw[cardKeyForTest].(string); x != "" && e.Content.AsMessage().RelatesTo.GetReplaceID() == "" {
			cards[x]++
		}
	}
	for _, x := range xs {
		if cards[x.ID.String()] != 1 {
			t.Errorf("execution %s has %d cards, want 1", x.ID, cards[x.ID.String()])
		}
	}
	n := 0
	for _, c := range f.fleet.Commands(t) {
		if c == restart {
			n++
		}
	}
	if n != 5 {
		t.Errorf("labsim ran the restart %d times, want 5 (once per plan)", n)
	}
	f.noReplays(t)
}

// noReplays checks that the running actuator refused no order as a
// replay: an order delivered twice would be.
func (f *failover) noReplays(t *testing.T) {
	t.Helper()
	resp, err := http.Get(f.metrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const replays = `nomos_actuator_requests_refused_total{kind="order",reason="replay"} `
	if !strings.Contains(string(body), replays+"0\n") {
		t.Errorf("the actuator refused a replayed order (want %s0):\n%s", replays, body)
	}
}

// cutLeaderLock ends the leader's lock connection from the database's
// side, as a Postgres failover or a cut network would. Only this test's
// database: the lock key is the same in every database of a shared
// server, and another test's bots must not lose theirs.
func (f *failover) cutLeaderLock(t *testing.T) {
	t.Helper()
	admin, err := pgx.Connect(f.ctx, f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var n int
	err = admin.QueryRow(f.ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, 0x4e4d, store.LeaderLockBot).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("cut the leader's lock connection: %d cut, %v", n, err)
	}
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}
