package actuator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/policy"
	"github.com/nomoshq/nomos/tasks"
)

// Probe health values.
const (
	healthy   = "healthy"
	degraded  = "degraded"
	unhealthy = "unhealthy"
)

// probeTimeout bounds one probe, connection included.
const probeTimeout = 30 * time.Second

// errProbeSpec marks a probe request the actuator cannot turn into a
// command; it is a bug on the sending side, not news about the target.
var errProbeSpec = errors.New("invalid probe")

// probeReport is what a probe saw.
type probeReport struct {
	health  string
	detail  string
	metrics map[string]float64
}

// misaddressed refuses a probe or inventory request (kind) signed for
// another actuator or a host of another site: it runs nothing and is not
// retried. It is nil for a request addressed here.
func (a *Actuator) misaddressed(log *slog.Logger, kind, id, actuator, site string) error {
	var why tasks.Refusal
	var err error
	switch {
	case actuator != a.cfg.Name:
		why, err = tasks.RefusedWrongActuator, fmt.Errorf("it is for actuator %q, not %q", actuator, a.cfg.Name)
	case site != a.cfg.Site:
		why, err = tasks.RefusedWrongSite, fmt.Errorf("it is for a host of site %q, not %q", site, a.cfg.Site)
	default:
		return nil
	}
	log.Warn(kind+" request refused", "err", err)
	a.metrics.refuse(kind, why)
	return fmt.Errorf("refuse %s %s: %v: %w", kind, id, err, asynq.SkipRetry)
}

// handleCheck runs one read-only probe and reports what it saw against the
// target the request names. Probes run a fixed command per kind; nothing
// from the request reaches a shell unvalidated and unquoted.
func (a *Actuator) handleCheck(ctx context.Context, t *asynq.Task) error {
	defer a.enter()()
	c, err := tasks.VerifyCheckRun(a.orderKeys, t.Payload(), a.now())
	if errors.Is(err, tasks.ErrExpired) {
		a.metrics.refuse(kindProbe, tasks.RefusedExpired)
		a.log.Debug("probe expired before it could run; its next slot replaces it", "check_id", c.CheckID, "expired_at", c.ExpiresAt)
		return nil
	}
	if err != nil {
		// Nothing runs and nothing is reported: a signed result for a
		// request the bot never made would lend the forgery credit.
		a.metrics.refuse(kindProbe, refusalFor(err))
		claims := tasks.Claimed(t.Payload())
		a.log.Warn("probe request refused: it is not signed by the bot", "check_id", claims.CheckID, "target_id", claims.TargetID, "err", err)
		return fmt.Errorf("refuse probe %s: %v: %w", claims.CheckID, err, asynq.SkipRetry)
	}
	log := a.log.With("check_id", c.CheckID, "target_id", c.TargetID, "kind", c.Kind)
	if err := a.misaddressed(log, kindProbe, c.CheckID, c.Actuator, c.Site); err != nil {
		return err
	}
	if c.Target.HostAddr == "" {
		a.metrics.refuse(kindProbe, tasks.RefusedMalformed)
		log.Error("probe request lacks a host address")
		return fmt.Errorf("run probe %s: %w: a host address is required: %w", c.CheckID, errProbeSpec, asynq.SkipRetry)
	}
	release, err := a.probeHosts.acquire(c.Target.HostAddr, kindProbe, a.now())
	if errors.Is(err, errHostBusy) {
		return a.deferProbe(ctx, log, t)
	}
	a.metrics.verify(kindProbe)
	start := a.now()
	var rep probeReport
	if err != nil {
		// The host has not answered the probes it holds: say so now,
		// rather than let this one wait for a worker it would only hold.
		a.metrics.heldBack.WithLabelValues(heldHostNotAnswering).Inc()
		log.Warn("probe not sent: its host is not answering", "err", err)
		rep = probeReport{health: unhealthy, detail: err.Error()}
	} else {
		rep = a.runProbe(log, c)
		release()
	}
	if rep.metrics == nil {
		rep.metrics = map[string]float64{}
	}
	rep.metrics["probe_ms"] = float64(a.now().Sub(start).Milliseconds())
	res := tasks.CheckResult{
		CheckID: c.CheckID, TargetID: c.TargetID, Actuator: a.cfg.Name,
		Health: rep.health, Detail: redact.String(rep.detail), Metrics: rep.metrics, At: a.now(),
	}
	task, err := tasks.NewCheckResultTask(a.cfg.ReportSigningKey, res)
	if err != nil {
		return fmt.Errorf("run probe %s: %w", c.CheckID, err)
	}
	if err := a.enqueue(a.reportCtx, task); err != nil {
		log.Warn("could not enqueue a probe result", "err", err)
		return fmt.Errorf("run probe %s: report: %w", c.CheckID, err)
	}
	log.Debug("probe done", "health", rep.health)
	return nil
}

// runProbe runs c within probeTimeout. A check that cannot run is
// reported, not dropped: otherwise its target would sit at "unknown" and
// nobody would learn why.
func (a *Actuator) runProbe(log *slog.Logger, c tasks.CheckRun) probeReport {
	ctx, cancel := context.WithTimeoutCause(a.workCtx, probeTimeout, fmt.Errorf("%w after %s", ErrTimedOut, probeTimeout))
	defer cancel()
	rep, err := a.probe(ctx, c)
	if err != nil {
		log.Error("probe request cannot run", "err", err)
		rep = probeReport{health: unhealthy, detail: "the check cannot run: " + err.Error()}
	}
	return rep
}

// deferProbe puts t, a read on the probe queue, back on that queue as a
// task of its own, for probeDeferDelay, twice that the next time and so on
// up to maxProbeDeferDelay, while its host holds its share of the workers:
// it then waits without holding one. Nothing has been sent, so it runs
// once, later, or expires (a probe's next slot, an inventory's next run
// replaces it).
func (a *Actuator) deferProbe(ctx context.Context, log *slog.Logger, t *asynq.Task) error {
	a.metrics.heldBack.WithLabelValues(heldHostBusy).Inc()
	taskID, _ := asynq.GetTaskID(ctx)
	id, wait := deferral(t.Payload(), taskID)
	again := asynq.NewTask(t.Type(), t.Payload(), asynq.Queue(tasks.ProbeQueue(a.cfg.Site)), asynq.MaxRetry(0),
		asynq.TaskID(id), asynq.ProcessIn(wait))
	if err := a.enqueue(a.reportCtx, again); err != nil {
		log.Warn("read not run: its host is busy and it could not be put back on the queue", "type", t.Type(), "err", err)
		return fmt.Errorf("defer %s: %w: %w", t.Type(), err, asynq.SkipRetry)
	}
	log.Debug("read put back: its host holds its share of the probe workers", "type", t.Type())
	return nil
}

func (a *Actuator) probe(ctx context.Context, c tasks.CheckRun) (probeReport, error) {
	t := c.Target
	if t.Type == string(policy.TargetVM) && slices.Contains([]string{"tcp", "systemd", "disk", "dns"}, c.Kind) {
		// These read from inside the guest, which pct exec reaches in a
		// container and nothing reaches in a VM.
		return probeReport{}, fmt.Errorf("%w: %s reads from inside the guest, which Nomos cannot enter in a VM; probe a VM's services over the network (http, ping) and its run state with pct_status", errProbeSpec, c.Kind)
	}
	switch c.Kind {
	case "http":
		u, err := healthURL(c)
		if err != nil {
			return probeReport{}, err
		}
		return a.probeHTTP(ctx, t.HostAddr, u, int(specNumber(c.Spec, "expect_status", 0))), nil
	case "tcp":
		port := int(specNumber(c.Spec, "port", float64(t.Port)))
		if port < 1 || port > 65535 {
			return probeReport{}, fmt.Errorf("%w: tcp needs a port in 1-65535, got %d", errProbeSpec, port)
		}
		return a.probeTCP(ctx, t, port), nil
	case "systemd":
		unit := cmp.Or(specString(c.Spec, "unit"), t.Unit)
		if err := policy.ValidateUnit(unit); err != nil {
			return probeReport{}, fmt.Errorf("%w: systemd: %v", errProbeSpec, err)
		}
		return a.probeSystemd(ctx, t, unit), nil
	case "disk":
		path := cmp.Or(specString(c.Spec, "path"), "/")
		if !pathRE.MatchString(path) {
			return probeReport{}, fmt.Errorf("%w: disk: path %q is not an absolute path of letters, digits, '.', '_', '-' and '/'", errProbeSpec, path)
		}
		return a.probeDisk(ctx, t, path, specNumber(c.Spec, "warn_pct", 85), specNumber(c.Spec, "crit_pct", 95)), nil
	case "pct_status":
		if policy.ValidateVMID(t.VMID) != nil {
			return probeReport{}, fmt.Errorf("%w: pct_status needs a container target, got vmid %d", errProbeSpec, t.VMID)
		}
		return a.probePctStatus(ctx, t), nil
	case "dns":
		name := cmp.Or(specString(c.Spec, "name"), "deb.debian.org")
		if !validHost(name) {
			return probeReport{}, fmt.Errorf("%w: dns: %q is not a host name", errProbeSpec, name)
		}
		return a.probeDNS(ctx, t, name), nil
	case "ping":
		host := cmp.Or(specString(c.Spec, "host"), t.Hostname)
		if !validHost(host) {
			return probeReport{}, fmt.Errorf("%w: ping: %q is not a host name or address", errProbeSpec, host)
		}
		return a.probePing(ctx, t.HostAddr, host), nil
	}
	return probeReport{}, fmt.Errorf("%w: unknown kind %q (want one of %s)", errProbeSpec, c.Kind, strings.Join(policy.CheckKinds(), ", "))
}

// probeRun runs a probe command; a nil report means it ran.
func (a *Actuator) probeRun(ctx context.Context, addr, cmd string) (stdout, stderr string, code int, failed *probeReport) {
	var out, errOut bytes.Buffer
	code, err := a.probeRunner.Run(ctx, addr, cmd, &out, &errOut)
	if err != nil {
		return "", "", code, &probeReport{health: unhealthy, detail: "the probe could not run: " + err.Error()}
	}
	return out.String(), errOut.String(), code, nil
}

// inGuest runs cmd inside the target's container, or on the host when the
// target has none.
func inGuest(t tasks.Target, cmd string) string {
	if t.VMID == 0 {
		return cmd
	}
	return "pct exec " + strconv.Itoa(t.VMID) + " -- " + cmd
}

// probeHTTP fetches u from the host. With expect (non-zero) only that
// status is healthy; without it any 2xx or 3xx is, and a 4xx is degraded.
func (a *Actuator) probeHTTP(ctx context.Context, addr string, u *url.URL, expect int) probeReport {
	cmd := "curl -sS -o /dev/null -w '%{http_code}' --max-time 10 " + policy.ShellQuote(u.String())
	out, errOut, code, failed := a.probeRun(ctx, addr, cmd)
	if failed != nil {
		return *failed
	}
	status, _ := strconv.Atoi(strings.TrimSpace(out))
	m := map[string]float64{"http_status": float64(status)}
	switch {
	case code != 0:
		return probeReport{unhealthy, fmt.Sprintf("GET %s failed: %s", u, cmp.Or(lastLine(errOut), "curl exited "+strconv.Itoa(code))), m}
	case expect != 0 && status == expect:
		return probeReport{healthy, fmt.Sprintf("GET %s answered %d", u, status), m}
	case expect != 0:
		return probeReport{unhealthy, fmt.Sprintf("GET %s answered %d, want %d", u, status, expect), m}
	case status >= 200 && status < 400:
		return probeReport{healthy, fmt.Sprintf("GET %s answered %d", u, status), m}
	case status >= 400 && status < 500:
		return probeReport{degraded, fmt.Sprintf("GET %s answered %d", u, status), m}
	}
	return probeReport{unhealthy, fmt.Sprintf("GET %s answered %d", u, status), m}
}

func (a *Actuator) probeTCP(ctx context.Context, t tasks.Target, port int) probeReport {
	out, errOut, code, failed := a.probeRun(ctx, t.HostAddr, inGuest(t, "ss -ltn"))
	if failed != nil {
		return *failed
	}
	if code != 0 {
		return probeReport{health: unhealthy, detail: "ss failed: " + cmp.Or(lastLine(errOut), "exit "+strconv.Itoa(code))}
	}
	suffix := ":" + strconv.Itoa(port)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "LISTEN" && strings.HasSuffix(f[3], suffix) {
			return probeReport{health: healthy, detail: fmt.Sprintf("something listens on TCP port %d (%s)", port, f[3])}
		}
	}
	return probeReport{health: unhealthy, detail: fmt.Sprintf("nothing listens on TCP port %d", port)}
}

func (a *Actuator) probeSystemd(ctx context.Context, t tasks.Target, unit string) probeReport {
	out, _, _, failed := a.probeRun(ctx, t.HostAddr, inGuest(t, "systemctl is-active "+policy.ShellQuote(unit)))
	if failed != nil {
		return *failed
	}
	state := strings.TrimSpace(out)
	switch state {
	case "active":
		return probeReport{health: healthy, detail: unit + " is active"}
	case "activating", "reloading", "deactivating":
		return probeReport{health: degraded, detail: unit + " is " + state}
	}
	return probeReport{health: unhealthy, detail: unit + " is " + cmp.Or(state, "not active")}
}

func (a *Actuator) probeDisk(ctx context.Context, t tasks.Target, path string, warn, crit float64) probeReport {
	out, errOut, code, failed := a.probeRun(ctx, t.HostAddr, inGuest(t, "df -P "+policy.ShellQuote(path)))
	if failed != nil {
		return *failed
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	var used float64
	var err error
	if len(f) >= 6 {
		used, err = strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
	}
	if code != 0 || len(f) < 6 || err != nil {
		return probeReport{health: unhealthy, detail: "df failed: " + cmp.Or(lastLine(errOut), lastLine(out))}
	}
	m := map[string]float64{"disk_used_pct": used}
	detail := fmt.Sprintf("%s is %.0f%% full", f[5], used)
	switch {
	case used >= crit:
		return probeReport{unhealthy, detail, m}
	case used >= warn:
		return probeReport{degraded, detail, m}
	}
	return probeReport{healthy, detail, m}
}

// probePctStatus reads a guest's run state from its node: pct status for
// a container, qm status for a VM. A running VM with its guest agent
// enabled is also pinged through the agent; one whose agent does not
// answer is degraded, since the OS inside may be hung.
func (a *Actuator) probePctStatus(ctx context.Context, t tasks.Target) probeReport {
	tool, kind := "pct", "container"
	if t.Type == string(policy.TargetVM) {
		tool, kind = "qm", "VM"
	}
	vmid := strconv.Itoa(t.VMID)
	out, errOut, code, failed := a.probeRun(ctx, t.HostAddr, tool+" status "+vmid)
	if failed != nil {
		return *failed
	}
	status := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "status:"))
	switch {
	case code != 0:
		return probeReport{health: unhealthy, detail: fmt.Sprintf("%s status %d failed: %s", tool, t.VMID, lastLine(errOut))}
	case status != "running":
		return probeReport{health: unhealthy, detail: fmt.Sprintf("%s %d is %s", kind, t.VMID, cmp.Or(status, "in an unknown state"))}
	case kind == "container" || !t.Agent:
		return probeReport{health: healthy, detail: fmt.Sprintf("%s %d is running", kind, t.VMID)}
	}
	_, errOut, code, failed = a.probeRun(ctx, t.HostAddr, "qm guest cmd "+vmid+" ping")
	if failed != nil {
		return *failed
	}
	if code != 0 {
		return probeReport{health: degraded, detail: fmt.Sprintf("VM %d is running, but its guest agent does not answer: %s", t.VMID, cmp.Or(lastLine(errOut), "exit "+strconv.Itoa(code))),
			metrics: map[string]float64{"agent_up": 0}}
	}
	return probeReport{health: healthy, detail: fmt.Sprintf("VM %d is running and its guest agent answers", t.VMID), metrics: map[string]float64{"agent_up": 1}}
}

func (a *Actuator) probeDNS(ctx context.Context, t tasks.Target, name string) probeReport {
	out, _, code, failed := a.probeRun(ctx, t.HostAddr, inGuest(t, "getent hosts "+policy.ShellQuote(name)))
	if failed != nil {
		return *failed
	}
	if code != 0 {
		return probeReport{health: unhealthy, detail: name + " does not resolve"}
	}
	return probeReport{health: healthy, detail: name + " resolves to " + strings.Fields(out + " ?")[0]}
}

var lossRE = regexp.MustCompile(`(\d+(?:\.\d+)?)% packet loss`)

func (a *Actuator) probePing(ctx context.Context, addr, host string) probeReport {
	out, errOut, _, failed := a.probeRun(ctx, addr, "ping -c 3 -W 2 "+policy.ShellQuote(host))
	if failed != nil {
		return *failed
	}
	m := lossRE.FindStringSubmatch(out)
	if m == nil {
		return probeReport{health: unhealthy, detail: "ping " + host + " failed: " + cmp.Or(lastLine(errOut), lastLine(out))}
	}
	loss, _ := strconv.ParseFloat(m[1], 64)
	metrics := map[string]float64{"loss_pct": loss}
	detail := fmt.Sprintf("%s: %s%% packet loss", host, m[1])
	switch {
	case loss == 0:
		return probeReport{healthy, detail, metrics}
	case loss < 100:
		return probeReport{degraded, detail, metrics}
	}
	return probeReport{unhealthy, detail, metrics}
}

var (
	pathRE    = regexp.MustCompile(`^/[A-Za-z0-9._/-]*$`)
	dnsNameRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
	// URL paths and queries: RFC 3986 characters without $ and ', which
	// mean something to a shell. The URL is quoted anyway.
	urlPathRE  = regexp.MustCompile(`^/[A-Za-z0-9._~!&()*+,;=:@%/-]*$`)
	urlQueryRE = regexp.MustCompile(`^[A-Za-z0-9._~!&()*+,;=:@%/?-]*$`)
)

// validHost accepts a DNS name or an IP address.
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return len(s) <= 253 && dnsNameRE.MatchString(s)
}

// healthURL is the URL an http probe fetches: spec.url, or one built from
// the target's hostname, port and health path.
func healthURL(c tasks.CheckRun) (*url.URL, error) {
	raw := specString(c.Spec, "url")
	if raw == "" {
		// The address beats the name: a Proxmox node often cannot
		// resolve its containers' host names.
		host := cmp.Or(specString(c.Spec, "host"), c.Target.IP, c.Target.Hostname)
		if host == "" {
			return nil, fmt.Errorf("%w: http needs spec.url, or a target with an address or host name", errProbeSpec)
		}
		raw = "http://" + host
		// spec.port names the port where the target has none of its
		// own, as a VM's services do.
		if port := int(specNumber(c.Spec, "port", float64(c.Target.Port))); port != 0 {
			raw += ":" + strconv.Itoa(port)
		}
		raw += cmp.Or(specString(c.Spec, "path"), c.Target.HealthPath, "/")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: http: %v", errProbeSpec, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: http: scheme must be http or https, got %q", errProbeSpec, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("%w: http: credentials in the URL are not accepted", errProbeSpec)
	case !validHost(u.Hostname()):
		return nil, fmt.Errorf("%w: http: %q is not a host name or address", errProbeSpec, u.Hostname())
	case u.EscapedPath() != "" && !urlPathRE.MatchString(u.EscapedPath()), !urlQueryRE.MatchString(u.RawQuery), u.Fragment != "":
		return nil, fmt.Errorf("%w: http: unusual characters in %q", errProbeSpec, raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: http: port %q", errProbeSpec, p)
		}
	}
	return u, nil
}

func specString(spec map[string]any, key string) string {
	s, _ := spec[key].(string)
	return s
}

func specNumber(spec map[string]any, key string, def float64) float64 {
	switch v := spec[key].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	return def
}
