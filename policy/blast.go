package policy

import (
	"cmp"
	"slices"
)

// EdgeType is the type of a relationship between two entities.
type EdgeType string

// The relationship types blast radius follows. Other types are ignored.
const (
	// EdgeHosts: a Proxmox host hosts a container (host:strong → lxc:101).
	EdgeHosts EdgeType = "hosts"
	// EdgeRuns: a container, or a host, runs a service
	// (lxc:101 → service:jellyfin).
	EdgeRuns EdgeType = "runs"
	// EdgeDependsOn: From needs To (service:paperless → service:postgres).
	EdgeDependsOn EdgeType = "depends_on"
	// EdgeRoutesTo: From proxies traffic to To (service:caddy →
	// service:jellyfin).
	EdgeRoutesTo EdgeType = "routes_to"
)

// Edge is one relationship between entity slugs.
type Edge struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	Type EdgeType `json:"type"`
}

// Affected is one entity in a blast radius and how the action reaches it.
type Affected struct {
	// Slug is the affected entity.
	Slug string `json:"slug"`
	// Via is the edge type that reached it.
	Via EdgeType `json:"via"`
	// From is the entity it was reached from: the target or another
	// affected entity.
	From string `json:"from"`
	// Depth counts edges from the target, starting at 1.
	Depth int `json:"depth"`
}

// PlanBlastRadius is the blast radius of action a on target. Creating a
// container touches nothing that exists: the host is only where it goes,
// so its other containers are not listed. Every other action reaches
// BlastRadius(edges, target).
func PlanBlastRadius(a Action, edges []Edge, target string) []Affected {
	if a == ActionPctCreate {
		return nil
	}
	return BlastRadius(edges, target)
}

// BlastRadius returns every entity affected by acting on target: what it
// hosts and runs, and transitively whatever depends on an affected entity or
// is routed to through one. Acting on host:strong reaches its containers,
// their services, the services that depend on those, and the backends a
// reverse proxy among them routes to.
//
// Edges are followed as hosts and runs forward (host → container →
// service), depends_on backward (acting on postgres affects paperless, which
// depends on it) and routes_to forward (acting on caddy affects what it
// routes to). The result is an upper bound: it assumes every reached entity
// is fully affected.
//
// The result excludes the target, holds each entity once, is ordered by depth
// then slug, and does not depend on the order of edges. Cycles are safe.
// Unknown edge types, empty slugs and self-loops are ignored.
func BlastRadius(edges []Edge, target string) []Affected {
	type hop struct {
		to  string
		via EdgeType
	}
	next := make(map[string][]hop)
	for _, e := range edges {
		if e.From == "" || e.To == "" || e.From == e.To {
			continue
		}
		switch e.Type {
		case EdgeHosts, EdgeRuns, EdgeRoutesTo:
			next[e.From] = append(next[e.From], hop{e.To, e.Type})
		case EdgeDependsOn:
			next[e.To] = append(next[e.To], hop{e.From, e.Type})
		}
	}
	for k, hs := range next {
		slices.SortFunc(hs, func(a, b hop) int {
			return cmp.Or(cmp.Compare(a.to, b.to), cmp.Compare(a.via, b.via))
		})
		next[k] = slices.CompactFunc(hs, func(a, b hop) bool { return a == b })
	}

	seen := map[string]bool{target: true}
	var out []Affected
	frontier := []string{target}
	for depth := 1; len(frontier) > 0; depth++ {
		var level []Affected
		for _, from := range frontier {
			for _, h := range next[from] {
				if seen[h.to] {
					continue
				}
				seen[h.to] = true
				level = append(level, Affected{Slug: h.to, Via: h.via, From: from, Depth: depth})
			}
		}
		// The frontier is sorted, so the first discovery of each entity is
		// the one from the smallest slug: deterministic whatever the edge order.
		slices.SortFunc(level, func(a, b Affected) int { return cmp.Compare(a.Slug, b.Slug) })
		frontier = frontier[:0]
		for _, a := range level {
			frontier = append(frontier, a.Slug)
		}
		out = append(out, level...)
	}
	return out
}
