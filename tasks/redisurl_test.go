package tasks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/nomoshq/nomos/tasks"
)

// TestParseRedisURL: the user name reaches the connection options, so a
// role logs in as its own ACL user; a URL without one stays the default
// user, as before.
func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]asynq.RedisClientOpt{
		"redis://nomos-bot:s3cret@redis:6379/0":     {Addr: "redis:6379", Username: "nomos-bot", Password: "s3cret"},
		"redis://nomos-actuator:pw@10.0.0.5:6379/2": {Addr: "10.0.0.5:6379", Username: "nomos-actuator", Password: "pw", DB: 2},
		"redis://:only-a-password@127.0.0.1:6379/0": {Addr: "127.0.0.1:6379", Password: "only-a-password"},
		"redis://127.0.0.1:6379":                    {Addr: "127.0.0.1:6379"},
	} {
		got, err := tasks.ParseRedisURL(in)
		if err != nil {
			t.Errorf("ParseRedisURL(%q): %v", in, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseRedisURL(%q) (-want +got):\n%s", in, diff)
		}
	}
	for _, bad := range []string{"http://redis:6379/0", "redis://redis:6379/zero"} {
		if _, err := tasks.ParseRedisURL(bad); err == nil {
			t.Errorf("ParseRedisURL(%q) took it", bad)
		}
	}
}
