package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nomoshq/nomos/actuator"
	"github.com/nomoshq/nomos/internal/pveout"
)

// The files `nomos discover -from DIR` reads in each host's directory,
// as an operator collects them (docs/operations.md).
const (
	fromResources = "cluster-resources.json"
)

var (
	fromNodeGuestsRE = regexp.MustCompile(`^nodes-(.+)-lxc\.json$`)
	fromConfigRE     = regexp.MustCompile(`^pct-config-(.*)\.txt$`)
)

// discoveredGuest is one guest as `nomos discover -from` prints it: what
// Nomos would record of it. A field nothing says is null.
type discoveredGuest struct {
	Host       string   `json:"host"`
	Node       string   `json:"node"`
	VMID       int      `json:"vmid"`
	Type       string   `json:"type"`
	Name       *string  `json:"name"`
	Status     *string  `json:"status"`
	Template   *bool    `json:"template"`
	Lock       *string  `json:"lock"`
	Tags       []string `json:"tags"`
	HAState    *string  `json:"hastate"`
	Onboot     *bool    `json:"onboot"`
	Protection *bool    `json:"protection"`
	Addresses  []string `json:"addresses"`
	Cores      *int     `json:"cores"`
	MemoryMB   *int     `json:"memory_mb"`
	Snapshots  []string `json:"snapshots"`
}

// runDiscoverFrom prints, as one JSON array, what the inventory would
// record from the outputs an operator collected under dir: no SSH, no
// config, no database, nothing written.
func runDiscoverFrom(w io.Writer, dir string) error {
	guests, err := discoverFrom(dir)
	if err != nil {
		return err
	}
	if guests == nil {
		guests = []discoveredGuest{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(guests)
}

// discoverFrom reads dir: one directory per host, named as in the
// config, each with cluster-resources.json, optionally
// nodes-<node>-lxc.json, and pct-config-<vmid>.txt per container.
func discoverFrom(dir string) ([]discoveredGuest, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discover -from: %w", err)
	}
	var out []discoveredGuest
	hosts := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		hosts++
		guests, err := discoverHost(filepath.Join(dir, e.Name()), e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, guests...)
	}
	if hosts == 0 {
		return nil, fmt.Errorf("discover -from: %s has no host directories: put each host's files in a directory named as the host", dir)
	}
	return out, nil
}

func discoverHost(dir, host string) ([]discoveredGuest, error) {
	resPath := filepath.Join(dir, fromResources)
	raw, err := os.ReadFile(resPath)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w (the stdout of `pvesh get /cluster/resources --output-format json`)", host, err)
	}
	resources, err := pveout.ParseResources(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", resPath, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", host, err)
	}
	listings := map[string]string{} // node -> file
	configs := map[int]string{}     // vmid -> file
	for _, e := range entries {
		name := e.Name()
		if m := fromNodeGuestsRE.FindStringSubmatch(name); m != nil {
			listings[m[1]] = filepath.Join(dir, name)
		} else if m := fromConfigRE.FindStringSubmatch(name); m != nil {
			vmid, err := strconv.Atoi(m[1])
			if err != nil || vmid < 100 {
				return nil, fmt.Errorf("%s: the name must be pct-config-<vmid>.txt, with the container's vmid", filepath.Join(dir, name))
			}
			configs[vmid] = filepath.Join(dir, name)
		}
	}
	node, err := pickNode(host, resources, listings)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", host, err)
	}
	var live []pveout.Guest
	if path, ok := listings[node]; ok {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", host, err)
		}
		if live, err = pveout.ParseNodeGuests(raw); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if live == nil {
			live = []pveout.Guest{} // the node has no containers: it said so
		}
	}
	plan, err := actuator.PlanInventory(resources, live, node, false)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", host, err)
	}
	var out []discoveredGuest
	for _, g := range plan.Local {
		var conf *pveout.Config
		if path, ok := configs[g.VMID]; ok {
			raw, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", host, err)
			}
			c, err := pveout.ParseConfig(string(raw))
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			conf = &c
		}
		c, _ := actuator.BuildContainer(g, conf, nil, nil)
		d := discoveredGuest{Host: host, Node: node, VMID: c.VMID, Type: "lxc", Name: orNull(c.Hostname), Status: orNull(c.Status),
			Lock: orNull(c.Lock), Tags: c.Tags, HAState: orNull(c.HAState), Snapshots: c.Snapshots}
		if g.Template != nil || conf != nil {
			d.Template = &c.Template
		}
		if conf != nil {
			onboot := c.Onboot != nil && *c.Onboot
			d.Onboot, d.Protection = &onboot, &c.Protection
			d.Addresses = append([]string{}, c.Addresses...)
			d.Cores, d.MemoryMB = intOrNull(c.Cores), intOrNull(c.MemoryMB)
		}
		out = append(out, d)
	}
	for _, g := range resources {
		if g.Type != "qemu" || g.Node != node || g.VMID < 100 {
			continue
		}
		out = append(out, discoveredGuest{Host: host, Node: node, VMID: g.VMID, Type: "qemu", Name: orNull(g.Name), Status: orNull(g.Status),
			Template: g.Template, Lock: orNull(g.Lock), Tags: g.Tags, HAState: orNull(g.HAState)})
	}
	slices.SortStableFunc(out, func(a, b discoveredGuest) int { return a.VMID - b.VMID })
	return out, nil
}

// pickNode is the host's node: the one named as the host's directory,
// else the one a single nodes-<node>-lxc.json names, else the only node
// the resources have (in their node entries, or, without them, in their
// guests).
func pickNode(host string, resources []pveout.Guest, listings map[string]string) (string, error) {
	set := map[string]bool{}
	for _, g := range resources {
		if g.Node != "" && (g.Type == "node" || g.Type == "lxc" || g.Type == "qemu") {
			set[g.Node] = true
		}
	}
	nodes := slices.Sorted(func(yield func(string) bool) {
		for n := range set {
			if !yield(n) {
				return
			}
		}
	})
	switch {
	case set[host]:
		return host, nil
	case len(listings) == 1:
		for n := range listings {
			return n, nil
		}
	case len(nodes) == 1:
		return nodes[0], nil
	case len(nodes) == 0:
		return "", errors.New("the cluster's resources name no node: " + fromResources + " is not the output of `pvesh get /cluster/resources --output-format json`")
	}
	return "", fmt.Errorf("which node is it? The cluster has %s: name the host's directory as its node, or add that node's nodes-<node>-lxc.json",
		strings.Join(nodes, ", "))
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func intOrNull(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
