package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ACLRedis is a Redis server of one test's own whose users are those of
// the shipped deploy/redis/users.acl, built by deploy/redis/acl.sh as
// compose builds them: the default user is off and each role logs in as
// its own user. The shared test Redis cannot be used for this: its
// default user is on, and it is not the test's to turn off.
type ACLRedis struct {
	Addr      string
	passwords map[string]string
	// Admin may do anything, for a test's own look at the server (its
	// ACL LOG); no role connects with it.
	Admin *redis.Client
}

// adminUser is the test's own user, added to the built file.
const adminUser = "nomos-test-admin"

// NewACLRedis starts the server with the users of passwords (user name to
// password), which must all be in users.acl, and stops it when t ends.
func NewACLRedis(t testing.TB, passwords map[string]string) *ACLRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server: %v (make prepare installs it)", err)
	}
	dir := t.TempDir()
	args := []string{filepath.Join(DeployDir(), "redis", "acl.sh"), filepath.Join(DeployDir(), "redis", "users.acl")}
	users := make([]string, 0, len(passwords))
	for u := range passwords {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		file := filepath.Join(dir, u+".password")
		if err := os.WriteFile(file, []byte(passwords[u]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, u+"="+file)
	}
	built, err := exec.Command("sh", args...).Output()
	if err != nil {
		t.Fatalf("testenv: deploy/redis/acl.sh: %v", describeExit(err))
	}
	adminPassword := randomHex(16)
	built = fmt.Appendf(built, "user %s on >%s ~* &* +@all\n", adminUser, adminPassword)
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, built, 0o600); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--aclfile", aclFile,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	// The server dies with the test binary, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	r := &ACLRedis{Addr: "127.0.0.1:" + strconv.Itoa(port), passwords: passwords}
	r.Admin = redis.NewClient(&redis.Options{Addr: r.Addr, Username: adminUser, Password: adminPassword})
	t.Cleanup(func() {
		r.Admin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(Context(t), 30*time.Second)
	defer cancel()
	for r.Admin.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("testenv: redis with the ACL users did not start:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// URL is the redis.url of user, with its password.
func (r *ACLRedis) URL(user string) string {
	return (&url.URL{Scheme: "redis", User: url.UserPassword(user, r.passwords[user]), Host: r.Addr, Path: "/0"}).String()
}

// Denied returns the ACL LOG: each command the server refused, as
// "user: reason object", newest first.
func (r *ACLRedis) Denied(ctx context.Context) ([]string, error) {
	entries, err := r.Admin.ACLLog(ctx, 128).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s: %s %s (%s)", e.Username, e.Reason, e.Object, e.Context))
	}
	return out, nil
}

// DeployDir is the repository's deploy/ directory.
func DeployDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

func describeExit(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(ee.Stderr)) + " (" + ee.Error() + ")"
	}
	return err.Error()
}
