package tasks

import (
	"fmt"
	"net/url"

	"github.com/hibiken/asynq"
)

// ParseRedisURL reads redis.url: redis://[USER[:PASSWORD]@]HOST:PORT[/DB],
// or rediss:// for TLS. It is asynq.ParseRedisURI plus the user name,
// which asynq drops: without it a connection logs in as Redis's default
// user, never as the role's own ACL user (deploy/redis/users.acl).
func ParseRedisURL(s string) (asynq.RedisClientOpt, error) {
	opt, err := asynq.ParseRedisURI(s)
	if err != nil {
		return asynq.RedisClientOpt{}, err
	}
	o, ok := opt.(asynq.RedisClientOpt)
	if !ok {
		return asynq.RedisClientOpt{}, fmt.Errorf("redis url: want redis:// or rediss://, got %T", opt)
	}
	u, err := url.Parse(s)
	if err != nil {
		return asynq.RedisClientOpt{}, err
	}
	o.Username = u.User.Username()
	return o, nil
}
