package bot

import (
	"testing"
)

func BenchmarkParseCommand(b *testing.B) {
	rbs := testRunbooks(b)
	texts := []string{"restart jellyfin", "jellyfin is down, restart it", "list containers", "exec 101 df -h", "what is going on with the fleet today?"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ParseCommand(texts[i%len(texts)], rbs)
	}
}
