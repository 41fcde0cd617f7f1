package tasks

import (
	"fmt"
	"net/url"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// RedisOpt is how a role connects to Redis: asynq's options for one
// server, whose clients read and write through small buffers.
type RedisOpt struct {
	asynq.RedisClientOpt
}

var _ asynq.RedisConnOpt = RedisOpt{}

// connBufferSize is the read and the write buffer of each Redis
// connection. go-redis gives each 32 KiB by default, so 64 KiB a
// connection, and asynq's server, client, inspector and the roles' own
// clients keep dozens of connections open: 2 to 4 MB of buffers in
// each role, live all the time, which the garbage collector's headroom
// then doubles in memory. Nomos's commands and replies are small (a
// task is a signed order or a check result of a few hundred bytes), and
// a longer reply is still read whole: go-redis reads past a full buffer.
const connBufferSize = 4 << 10

// MakeRedisClient is asynq.RedisClientOpt's client, with connBufferSize
// buffers.
func (o RedisOpt) MakeRedisClient() any {
	return redis.NewClient(&redis.Options{
		Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, TLSConfig: o.TLSConfig,
		ReadBufferSize: connBufferSize, WriteBufferSize: connBufferSize,
	})
}

// ParseRedisURL reads redis.url: redis://[USER[:PASSWORD]@]HOST:PORT[/DB],
// or rediss:// for TLS. It is asynq.ParseRedisURI plus the user name,
// which asynq drops: without it a connection logs in as Redis's default
// user, never as the role's own ACL user (deploy/redis/users.acl).
func ParseRedisURL(s string) (RedisOpt, error) {
	opt, err := asynq.ParseRedisURI(s)
	if err != nil {
		return RedisOpt{}, err
	}
	o, ok := opt.(asynq.RedisClientOpt)
	if !ok {
		return RedisOpt{}, fmt.Errorf("redis url: want redis:// or rediss://, got %T", opt)
	}
	u, err := url.Parse(s)
	if err != nil {
		return RedisOpt{}, err
	}
	o.Username = u.User.Username()
	return RedisOpt{o}, nil
}
