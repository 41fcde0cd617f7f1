package actuator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/internal/logctx"
	"github.com/nomoshq/nomos/internal/redact"
	"github.com/nomoshq/nomos/tasks"
)

// The inventory's fixed, read-only commands. Only a vmid the host itself
// listed, checked to be a number in Proxmox's range, is ever added.
const (
	// listResources asks for every resource, not only --type vm: the node
	// entries prove the node name the bot asked about is one the cluster
	// has, so a wrong name fails the run rather than making every
	// container look gone.
	listResources = "pvesh get /cluster/resources --output-format json"
	pctConfigCmd  = "pct config "
)

// Bounds on what a host may send back.
const (
	inventoryTimeout = 2 * time.Minute
	maxListingBytes  = 8 << 20
	maxConfigBytes   = 64 << 10
)

// handleInventory lists one node's containers and reports them, signed,
// on the results queue. A request that does not verify, is for another
// actuator or has expired runs nothing and is not answered.
func (a *Actuator) handleInventory(_ context.Context, t *asynq.Task) error {
	defer a.enter()()
	r, err := tasks.VerifyInventoryRun(a.orderKeys, t.Payload(), a.now())
	if errors.Is(err, tasks.ErrExpired) {
		a.metrics.refuse(kindInventory, tasks.RefusedExpired)
		a.log.Debug("inventory request expired before it could run; the next one replaces it", "run_id", r.RunID, "expired_at", r.ExpiresAt)
		return nil
	}
	if err != nil {
		a.metrics.refuse(kindInventory, refusalFor(err))
		claims := tasks.Claimed(t.Payload())
		a.log.Warn("inventory request refused: it is not signed by the bot", "run_id", claims.RunID, "host_id", claims.HostID, "err", err)
		return fmt.Errorf("refuse inventory %s: %v: %w", claims.RunID, err, asynq.SkipRetry)
	}
	log := a.log.With("run_id", r.RunID, "host", r.Host, "node", r.Node)
	if err := a.misaddressed(log, kindInventory, r.RunID, r.Actuator, r.Site); err != nil {
		return err
	}
	a.metrics.verify(kindInventory)
	ctx, cancel := context.WithTimeoutCause(logctx.With(a.workCtx, log), inventoryTimeout, fmt.Errorf("%w after %s", ErrTimedOut, inventoryTimeout))
	defer cancel()
	res := tasks.InventoryResult{RunID: r.RunID, HostID: r.HostID, Actuator: a.cfg.Name, Node: r.Node}
	res.Containers, res.Elsewhere, err = a.inventory(ctx, r)
	if err != nil {
		// Reported, not dropped: the bot learns the host did not answer,
		// and marks nothing gone for it.
		log.Warn("inventory failed", "err", err)
		res.Containers, res.Elsewhere = nil, nil
		res.Error = clipString(redact.String(err.Error()), tasks.MaxInventoryError)
	}
	res.At = a.now()
	task, err := tasks.NewInventoryResultTask(a.cfg.ReportSigningKey, res)
	if err != nil {
		return fmt.Errorf("report inventory %s: %w", r.RunID, err)
	}
	if err := a.enqueue(a.reportCtx, task); err != nil {
		log.Warn("could not enqueue an inventory", "err", err)
		return fmt.Errorf("report inventory %s: %w", r.RunID, err)
	}
	log.Debug("inventory done", "containers", len(res.Containers), "elsewhere", len(res.Elsewhere))
	return nil
}

// resource is the part of a /cluster/resources entry the inventory reads.
type resource struct {
	Type     string  `json:"type"`
	Node     string  `json:"node"`
	Status   string  `json:"status"`
	Name     string  `json:"name"`
	VMID     flexInt `json:"vmid"`
	Template flexInt `json:"template"`
}

// flexInt reads a JSON number or a number in a string, as pvesh writes
// either depending on its version.
type flexInt int

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole number: %s", b)
	}
	*n = flexInt(v)
	return nil
}

var statusWordRE = regexp.MustCompile(`^[a-z]{1,16}$`)

// inventory lists the containers of r.Node and the vmids the cluster has
// elsewhere, then reads each local container's configuration.
func (a *Actuator) inventory(ctx context.Context, r tasks.InventoryRun) ([]tasks.InventoryContainer, []int, error) {
	log := logctx.From(ctx)
	out, errOut, code, err := a.capture(ctx, r.HostAddr, listResources, maxListingBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("list the cluster's resources: %w", err)
	}
	if code != 0 {
		return nil, nil, fmt.Errorf("%s exited %d: %s", listResources, code, lastLine(errOut))
	}
	var resources []resource
	if err := json.Unmarshal([]byte(out), &resources); err != nil {
		return nil, nil, fmt.Errorf("%s did not answer JSON: %v", listResources, err)
	}
	nodes := map[string]bool{}
	type listed struct {
		vmid           int
		status, name   string
		local, invalid bool
	}
	var cts []listed
	for _, res := range resources {
		switch res.Type {
		case "node":
			nodes[res.Node] = true
		case "lxc":
			if res.Template == 1 {
				continue // a template is not a workload
			}
			vmid := int(res.VMID)
			cts = append(cts, listed{vmid: vmid, status: res.Status, name: res.Name, local: res.Node == r.Node,
				invalid: (tasks.InventoryContainer{VMID: vmid, Status: "x"}).Validate() != nil})
		}
	}
	if !nodes[r.Node] {
		return nil, nil, fmt.Errorf("the cluster has no node named %q (it lists %s): set the host's node name in the fleet data",
			r.Node, cmp.Or(strings.Join(slices.Sorted(maps.Keys(nodes)), ", "), "none"))
	}
	var local []tasks.InventoryContainer
	var elsewhere []int
	seen := map[int]bool{}
	for _, ct := range cts {
		if ct.invalid || seen[ct.vmid] {
			log.Warn("inventory skipped a resource with a bad or repeated vmid", "vmid", ct.vmid)
			continue
		}
		seen[ct.vmid] = true
		if !ct.local {
			elsewhere = append(elsewhere, ct.vmid)
			continue
		}
		status := ct.status
		if !statusWordRE.MatchString(status) {
			status = "unknown"
		}
		local = append(local, tasks.InventoryContainer{VMID: ct.vmid, Status: status, Hostname: ct.name})
	}
	if len(local) > tasks.MaxInventoryContainers || len(elsewhere) > tasks.MaxInventoryContainers {
		return nil, nil, fmt.Errorf("the cluster lists more than %d containers", tasks.MaxInventoryContainers)
	}
	slices.SortFunc(local, func(x, y tasks.InventoryContainer) int { return x.VMID - y.VMID })
	slices.Sort(elsewhere)
	if err := a.readConfigs(ctx, r.HostAddr, local); err != nil {
		return nil, nil, err
	}
	return local, elsewhere, nil
}

// readConfigs fills each listed container in from its configuration. A
// configuration it cannot read leaves the container as listed, marked
// partial; only the end of ctx fails the inventory.
func (a *Actuator) readConfigs(ctx context.Context, addr string, local []tasks.InventoryContainer) error {
	log := logctx.From(ctx)
	for i, c := range local {
		cmd := pctConfigCmd + strconv.Itoa(c.VMID)
		conf, _, code, err := a.capture(ctx, addr, cmd, maxConfigBytes)
		if err == nil && code == 0 {
			c = parsePctConfig(c, conf)
		} else {
			// Destroyed since the listing, or the host is struggling:
			// what the listing said is still news.
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", cmd, context.Cause(ctx))
			}
			log.Warn("inventory could not read a container's configuration", "vmid", c.VMID, "exit", code, "err", err)
			c.Partial = true
		}
		var dropped []string
		local[i], dropped = keepValid(c)
		if len(dropped) > 0 {
			log.Warn("inventory left out values the host gave that are not what Proxmox allows", "vmid", c.VMID, "fields", dropped)
		}
	}
	return nil
}

// capture runs cmd and returns its output and exit code; stdout past
// limit fails the command, so a host cannot flood the actuator.
func (a *Actuator) capture(ctx context.Context, addr, cmd string, limit int) (stdout, stderr string, code int, err error) {
	out, errOut := &cappedBuffer{limit: limit}, &cappedBuffer{limit: 4 << 10}
	code, err = a.runner.Run(ctx, addr, cmd, out, errOut)
	if err != nil {
		return "", "", code, err
	}
	if out.over {
		return "", "", code, fmt.Errorf("%s: more than %d bytes of output", cmd, limit)
	}
	return out.String(), errOut.String(), code, nil
}

// cappedBuffer keeps up to limit bytes and notes that more came.
type cappedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// parsePctConfig reads what the inventory keeps from `pct config`: the
// host name, net0's address and gateway, cores, memory and the root
// disk's size. Lines it does not know, comments (the description) and
// snapshot sections are ignored.
func parsePctConfig(c tasks.InventoryContainer, conf string) tasks.InventoryContainer {
	for line := range strings.Lines(conf) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			break // a snapshot's section: the current config is above it
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "hostname":
			c.Hostname = val
		case "cores":
			c.Cores, _ = strconv.Atoi(val)
		case "memory":
			c.MemoryMB, _ = strconv.Atoi(val)
		case "net0":
			for kv := range strings.SplitSeq(val, ",") {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "ip":
					if v != "manual" { // configured inside the guest
						c.IP = v
					}
				case "gw":
					c.Gateway = v
				}
			}
		case "rootfs":
			for kv := range strings.SplitSeq(val, ",") {
				if size, ok := strings.CutPrefix(kv, "size="); ok {
					c.DiskGB = diskGB(size)
				}
			}
		}
	}
	return c
}

// diskGB reads a Proxmox disk size (20G, 512M, 1T, or bytes) in GiB.
func diskGB(s string) float64 {
	unit := 1.0 / (1 << 30)
	switch {
	case strings.HasSuffix(s, "T"):
		unit, s = 1024, strings.TrimSuffix(s, "T")
	case strings.HasSuffix(s, "G"):
		unit, s = 1, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		unit, s = 1.0/1024, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		unit, s = 1.0/(1<<20), strings.TrimSuffix(s, "K")
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * unit
}

// keepValid keeps each field of c that Proxmox's rules allow, judged on
// its own, and names the ones it left out: an odd value from a host costs
// that value, not the container.
func keepValid(c tasks.InventoryContainer) (tasks.InventoryContainer, []string) {
	out := tasks.InventoryContainer{VMID: c.VMID, Status: c.Status, Partial: c.Partial}
	var dropped []string
	try := func(name string, set func(*tasks.InventoryContainer)) {
		alone := tasks.InventoryContainer{VMID: c.VMID, Status: c.Status}
		set(&alone)
		if alone.Validate() != nil {
			dropped = append(dropped, name)
			return
		}
		set(&out)
	}
	try("hostname", func(x *tasks.InventoryContainer) { x.Hostname = c.Hostname })
	if !c.Partial {
		try("ip", func(x *tasks.InventoryContainer) { x.IP = c.IP })
		try("gateway", func(x *tasks.InventoryContainer) { x.Gateway = c.Gateway })
		try("cores", func(x *tasks.InventoryContainer) { x.Cores = c.Cores })
		try("memory", func(x *tasks.InventoryContainer) { x.MemoryMB = c.MemoryMB })
		try("disk", func(x *tasks.InventoryContainer) { x.DiskGB = c.DiskGB })
	}
	return out, dropped
}

// clipString cuts s to at most n bytes of valid UTF-8.
func clipString(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
