package policy

import (
	"encoding/json"
	"testing"
)

func BenchmarkClassifyCommand(b *testing.B) {
	cmds := []string{
		"df -h / && free -m && uptime",
		"systemctl restart nginx.service",
		"curl -fsS http://localhost:8080/health | grep ok",
		"rm -rf /var/lib/docker && mkfs.ext4 /dev/sdb1",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ClassifyCommand(cmds[i%len(cmds)], TargetLXC)
	}
}

func BenchmarkPlanHash(b *testing.B) {
	params, err := ParseParams(ActionPctCreate, json.RawMessage(`{"hostname":"web","ip":"10.0.0.5/24","gw":"10.0.0.1","services":["nginx"],"post_install":"curl -fsS http://localhost/"}`))
	if err != nil {
		b.Fatal(err)
	}
	target := Target{Type: TargetHost, ID: "h", Slug: "host:strong", Host: "strong"}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := NewPlan(params, target)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := PlanHash(plan); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDecision(b *testing.B) {
	texts := []string{"go ahead", "Yes please!", "no idea why it's down", "lgtm 👍", "stop"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ParseDecision(texts[i%len(texts)])
	}
}
