package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nomoshq/nomos/internal/testenv"
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
		if diff := cmp.Diff(want, got.RedisClientOpt); diff != "" {
			t.Errorf("ParseRedisURL(%q) (-want +got):\n%s", in, diff)
		}
	}
	for _, bad := range []string{"http://redis:6379/0", "redis://redis:6379/zero"} {
		if _, err := tasks.ParseRedisURL(bad); err == nil {
			t.Errorf("ParseRedisURL(%q) took it", bad)
		}
	}
}

// TestRedisClientBuffers: every client a role makes from redis.url reads
// and writes through 4 KiB buffers, not go-redis's 32 KiB ones, which
// cost each role megabytes over its dozens of connections; and a reply
// longer than the buffer still arrives whole.
func TestRedisClientBuffers(t *testing.T) {
	t.Parallel()
	opt, err := tasks.ParseRedisURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var conn asynq.RedisConnOpt = opt
	c := conn.MakeRedisClient().(*redis.Client)
	t.Cleanup(func() { c.Close() })
	if got := c.Options(); got.ReadBufferSize != 4<<10 || got.WriteBufferSize != 4<<10 {
		t.Errorf("buffers: read %d, write %d bytes; want 4096 each", got.ReadBufferSize, got.WriteBufferSize)
	}
	if got := c.Options().Username; got != opt.Username {
		t.Errorf("username %q, want %q", got, opt.Username)
	}
	ctx := t.Context()
	long := strings.Repeat("nomos ", 20000)
	key := "redisbuffers:" + t.Name()
	if err := c.Set(ctx, key, long, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got != long {
		t.Errorf("a %d-byte value came back as %d bytes", len(long), len(got))
	}
}
