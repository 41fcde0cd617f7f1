package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/nomoshq/nomos/internal/config"
)

// loadCompose loads deploy/ compose files as `docker compose config` would,
// with deploy/env.example as the .env and the given profiles on (and, with
// compose.llm.yaml, the model env.example leaves commented). It fails
// on anything compose would refuse: a bad key, an undefined secret,
// network or volume, a required variable missing from env.example.
func loadCompose(t *testing.T, profiles []string, files ...string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(abs, f)
	}
	var env []string
	if slices.Contains(files, "compose.llm.yaml") {
		// As env.example's LLM lines, uncommented.
		env = append(env, "NOMOS_LLM_MODEL=deepseek/deepseek-chat")
	}
	opts, err := cli.NewProjectOptions(paths,
		cli.WithWorkingDirectory(abs),
		cli.WithEnvFiles(filepath.Join(abs, "env.example")),
		cli.WithDotEnv,
		cli.WithEnv(env),
		cli.WithProfiles(profiles),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose would refuse %v: %v", files, err)
	}
	return p
}

// composeSecretReaders is, for every secret, the only services that may
// mount it. A secret missing here is a problem too: adding one means
// deciding who reads it.
var composeSecretReaders = map[string][]string{
	"postgres_password":       {"postgres"},
	"redis_bot_password":      {"redis"},
	"redis_actuator_password": {"redis"},
	"database_url":            {"nomos-migrate", "nomos-seed", "nomos-bot"},
	// Each role its own Redis user (deploy/redis/users.acl).
	"bot_redis_url":       {"nomos-bot"},
	"actuator_redis_url":  {"nomos-actuator"},
	"matrix_password":     {"nomos-bot"},
	"pickle_key":          {"nomos-bot"},
	"web_password":        {"nomos-bot"},
	"llm_api_key":         {"nomos-bot"},
	"orders_signing_key":  {"nomos-bot"},
	"reports_verify_key":  {"nomos-bot"},
	"ssh_key":             {"nomos-actuator"},
	"known_hosts":         {"nomos-actuator"},
	"orders_verify_key":   {"nomos-actuator"},
	"reports_signing_key": {"nomos-actuator"},
	// Only during a key rotation (compose.rotate-*.yaml).
	"orders_verify_previous":  {"nomos-actuator"},
	"reports_verify_previous": {"nomos-bot"},
	// The watchdog's own account (compose.watchdog.yaml).
	"watchdog_matrix_password": {"nomos-watchdog"},
}

// composeSecretNeeds are the secrets each role cannot work without.
var composeSecretNeeds = map[string][]string{
	"nomos-bot":      {"database_url", "bot_redis_url", "matrix_password", "pickle_key", "orders_signing_key", "reports_verify_key", "web_password"},
	"nomos-actuator": {"actuator_redis_url", "ssh_key", "known_hosts", "orders_verify_key", "reports_signing_key"},
	"nomos-migrate":  {"database_url"},
	"redis":          {"redis_bot_password", "redis_actuator_password"},
	"nomos-watchdog": {"watchdog_matrix_password"},
}

// composeVolumeUsers is, for every named volume, the only service that may
// mount it: the actuator's journal and the bot's state are never shared.
var composeVolumeUsers = map[string]string{
	"postgres-data":    "postgres",
	"redis-data":       "redis",
	"bot-state":        "nomos-bot",
	"actuator-journal": "nomos-actuator",
	"db-backups":       "nomos-migrate",
	"synapse-data":     "homeserver",
}

// composeNetworkMembers is who may join each network. The actuator is not
// on db: it cannot even reach Postgres.
var composeNetworkMembers = map[string][]string{
	"db":     {"postgres", "nomos-migrate", "nomos-seed", "nomos-bot"},
	"queue":  {"redis", "nomos-bot", "nomos-actuator"},
	"egress": {"nomos-bot", "nomos-actuator", "homeserver"},
	// The watchdog's way out, on its own machine.
	"watch": {"nomos-watchdog"},
}

// composeStartOrder is each service's dependencies and the condition it
// waits for.
var composeStartOrder = map[string]map[string]string{
	"nomos-migrate":  {"postgres": types.ServiceConditionHealthy},
	"nomos-seed":     {"nomos-migrate": types.ServiceConditionCompletedSuccessfully},
	"nomos-bot":      {"postgres": types.ServiceConditionHealthy, "redis": types.ServiceConditionHealthy, "nomos-migrate": types.ServiceConditionCompletedSuccessfully},
	"nomos-actuator": {"redis": types.ServiceConditionHealthy},
}

var (
	composeLongRunning = []string{"postgres", "redis", "nomos-bot", "nomos-actuator", "homeserver", "nomos-watchdog"}
	composeOneShot     = []string{"nomos-migrate", "nomos-seed"}
)

// redisConfigs are the only compose configs, mounted into Redis alone:
// the users' rules and the script that adds their passwords.
var redisConfigs = []string{"redis_users_acl", "redis_acl_sh"}

// redisRoleUsers is the Redis user each role logs in as.
var redisRoleUsers = map[string]string{"nomos-bot": "nomos-bot", "nomos-actuator": "nomos-actuator"}

// redisACLProblems lists the ways Redis r is not started on the shipped
// ACL users: the file it loads must be the one acl.sh builds from
// deploy/redis/users.acl, with a password for each role's user from a
// secret Redis mounts.
func redisACLProblems(p *types.Project, r types.ServiceConfig) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	i := slices.Index(r.Command, "--aclfile")
	if i < 0 || i+1 >= len(r.Command) {
		return []string{fmt.Sprintf("redis runs without its ACL users (no --aclfile): every role would log in as the default user (%q)", r.Command)}
	}
	aclFile := r.Command[i+1]
	mountedAt := map[string]string{}
	for _, c := range r.Configs {
		mountedAt[c.Source] = c.Target
	}
	ep := r.Entrypoint
	if len(ep) < 5 || ep[0] != "sh" || ep[1] != mountedAt["redis_acl_sh"] || ep[2] != "-o" || ep[3] != aclFile ||
		ep[4] != mountedAt["redis_users_acl"] || ep[len(ep)-1] != "--" {
		bad("redis's entrypoint does not build %s from users.acl with acl.sh before it starts: %q", aclFile, ep)
		return problems
	}
	var acl []byte
	if c, ok := p.Configs["redis_users_acl"]; !ok || filepath.Base(c.File) != "users.acl" || filepath.Base(filepath.Dir(c.File)) != "redis" {
		bad("config redis_users_acl is not deploy/redis/users.acl")
	} else if b, err := os.ReadFile(c.File); err != nil {
		bad("read %s: %v", c.File, err)
	} else {
		acl = b
	}
	secrets := map[string]bool{}
	for _, s := range r.Secrets {
		secrets["/run/secrets/"+s.Source] = true
	}
	given := map[string]bool{}
	for _, pair := range ep[5 : len(ep)-1] {
		user, file, ok := strings.Cut(pair, "=")
		switch {
		case !ok:
			bad("redis's entrypoint passes %q to acl.sh, want USER=PASSWORD_FILE", pair)
		case !secrets[file]:
			bad("redis takes the password of %s from %s, which is not a secret it mounts", user, file)
		case acl != nil && !regexp.MustCompile(`(?m)^user `+regexp.QuoteMeta(user)+` `).Match(acl):
			bad("redis gives a password to %s, a user deploy/redis/users.acl does not have: acl.sh would refuse to start", user)
		}
		given[user] = true
	}
	for role, user := range redisRoleUsers {
		if !given[user] {
			bad("redis gives Redis user %s, the one %s logs in as, no password: it could not log in", user, role)
		}
	}
	return problems
}

// composeProblems lists every way p breaks the separation and start-up
// order that docs/security.md and docs/install.md promise.
func composeProblems(p *types.Project) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	for name, s := range p.Secrets {
		if s.File == "" || s.Environment != "" || s.Content != "" {
			bad("secret %s is not a file in deploy/secrets/: an environment or inline secret is a literal in the compose process", name)
		}
		if _, ok := composeSecretReaders[name]; !ok {
			bad("secret %s has no entry in composeSecretReaders: decide which services may read it", name)
		}
	}
	for network, members := range composeNetworkMembers {
		if n, ok := p.Networks[network]; ok && network != "egress" && network != "watch" && !n.Internal {
			bad("network %s is not internal: %v would have a way out", network, members)
		}
	}

	for name, svc := range p.Services {
		mounted := map[string]bool{}
		var volumeTargets []string
		for _, s := range svc.Secrets {
			mounted[s.Source] = true
			if readers, ok := composeSecretReaders[s.Source]; !ok {
				bad("%s mounts secret %s, which has no entry in composeSecretReaders", name, s.Source)
			} else if !slices.Contains(readers, name) {
				bad("%s mounts secret %s, which only %v may read", name, s.Source, readers)
			}
			if s.Target != "" && s.Target != s.Source && s.Target != "/run/secrets/"+s.Source {
				bad("%s mounts secret %s as %s: keep /run/secrets/<name>, so the path says what it is", name, s.Source, s.Target)
			}
		}
		for _, need := range composeSecretNeeds[name] {
			if !mounted[need] {
				bad("%s does not mount secret %s, which it needs", name, need)
			}
		}
		for _, v := range svc.Volumes {
			switch {
			case v.Type == types.VolumeTypeVolume && composeVolumeUsers[v.Source] == name:
				volumeTargets = append(volumeTargets, v.Target)
			case v.Type == types.VolumeTypeVolume:
				bad("%s mounts volume %s, which belongs to %q", name, v.Source, composeVolumeUsers[v.Source])
			case v.Type == types.VolumeTypeBind && name == "nomos-seed" && v.Target == "/etc/nomos/seeds" && v.ReadOnly:
			case v.Type == types.VolumeTypeTmpfs:
			default:
				bad("%s bind-mounts %s at %s: a host path would bypass the secrets and volumes it is given", name, v.Source, v.Target)
			}
		}
		if len(svc.VolumesFrom) > 0 {
			bad("%s takes volumes_from %v: it would see another service's volumes", name, svc.VolumesFrom)
		}
		for _, c := range svc.Configs {
			if name != "redis" || !slices.Contains(redisConfigs, c.Source) {
				bad("%s mounts config %s: files reach a nomos role only as secrets or its own volume", name, c.Source)
			}
		}
		for network := range svc.Networks {
			if !slices.Contains(composeNetworkMembers[network], name) {
				bad("%s joins network %s, which only %v may join", name, network, composeNetworkMembers[network])
			}
		}
		if svc.NetworkMode != "" || svc.Pid != "" || svc.Ipc != "" || svc.UserNSMode != "" {
			bad("%s shares a namespace (network_mode %q, pid %q, ipc %q, userns %q)", name, svc.NetworkMode, svc.Pid, svc.Ipc, svc.UserNSMode)
		}
		if svc.Privileged || len(svc.CapAdd) > 0 || len(svc.Devices) > 0 || svc.UseAPISocket {
			bad("%s is privileged, adds capabilities or devices, or reaches the Docker API", name)
		}
		if strings.HasPrefix(name, "nomos-") {
			if !svc.ReadOnly {
				bad("%s: want read_only: true", name)
			}
			if !slices.Contains(svc.CapDrop, "ALL") {
				bad("%s: want cap_drop: [ALL]", name)
			}
			if !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
				bad("%s: want security_opt no-new-privileges:true", name)
			}
			if u, _, _ := strings.Cut(svc.User, ":"); u == "root" || u == "0" {
				bad("%s runs as root", name)
			}
		}

		for key, value := range svc.Environment {
			v := ""
			if value != nil {
				v = *value
			}
			if strings.HasSuffix(key, "_FILE") {
				secret, isSecret := strings.CutPrefix(v, "/run/secrets/")
				inVolume := slices.ContainsFunc(volumeTargets, func(target string) bool { return strings.HasPrefix(v, target+"/") })
				switch {
				case isSecret && !mounted[secret]:
					bad("%s sets %s to %s, a secret it does not mount", name, key, v)
				case !isSecret && !inVolume:
					bad("%s sets %s to %s, neither a mounted secret nor its own volume", name, key, v)
				}
				continue
			}
			if looksSecret(key, v) {
				bad("%s has a secret in its environment (%s): mount it under secrets: and set %s_FILE", name, key, key)
			}
		}
		for _, arg := range append(slices.Clone(svc.Entrypoint), svc.Command...) {
			if looksSecret("", arg) || secretFlagPattern.MatchString(arg) {
				bad("%s has a secret on its command line (%q): anyone running ps on the host sees it", name, arg)
			}
		}

		for dep, want := range composeStartOrder[name] {
			got, ok := svc.DependsOn[dep]
			if !ok || got.Condition != want {
				bad("%s must wait for %s: want depends_on condition %s, got %q", name, dep, want, got.Condition)
			}
		}
		for dep, d := range svc.DependsOn {
			target, ok := p.Services[dep]
			if ok && d.Condition == types.ServiceConditionHealthy && (target.HealthCheck == nil || target.HealthCheck.Disable) {
				bad("%s waits for %s to be healthy, but %s has no health check", name, dep, dep)
			}
		}
		switch {
		case slices.Contains(composeLongRunning, name):
			if hc := svc.HealthCheck; hc == nil || hc.Disable || len(hc.Test) == 0 {
				bad("%s has no health check", name)
			}
			if svc.Restart == "" || svc.Restart == types.RestartPolicyNo {
				bad("%s: want a restart policy, got %q", name, svc.Restart)
			}
		case slices.Contains(composeOneShot, name):
			if svc.Restart != types.RestartPolicyNo {
				bad("%s is a one-shot: want restart \"no\", got %q (it would run again and again)", name, svc.Restart)
			}
		default:
			bad("service %s is neither long-running nor one-shot in this test: add it to the tables above", name)
		}
	}

	if bot, ok := p.Services["nomos-bot"]; ok && (bot.HealthCheck == nil || !slices.Contains(bot.HealthCheck.Test, botHealthURL)) {
		bad("nomos-bot's health check does not fetch %s", botHealthURL)
	}
	if a, ok := p.Services["nomos-actuator"]; ok {
		if a.HealthCheck == nil || !slices.Contains(a.HealthCheck.Test, actuatorHealthURL) {
			bad("nomos-actuator's health check does not fetch %s (its Redis consumer and journal)", actuatorHealthURL)
		}
		if a.StopGracePeriod == nil || time.Duration(*a.StopGracePeriod) <= actuatorStopTime {
			bad("nomos-actuator's stop_grace_period is not longer than its shutdown (%v): compose would kill running commands unreported", actuatorStopTime)
		}
	}
	for name, svc := range p.Services {
		if _, tag, ok := strings.Cut(path.Base(svc.Image), ":"); !ok || tag == "latest" {
			bad("%s runs image %q: pin a release tag, not latest", name, svc.Image)
		}
	}
	if pg, ok := p.Services["postgres"]; ok && !strings.HasPrefix(pg.Image, "postgres:17") {
		bad("postgres image %s, want postgres:17", pg.Image)
	}
	if r, ok := p.Services["redis"]; ok {
		if !strings.HasPrefix(r.Image, "redis:7") {
			bad("redis image %s, want redis:7", r.Image)
		}
		if i := slices.Index(r.Command, "--appendonly"); i < 0 || i+1 >= len(r.Command) || r.Command[i+1] != "yes" {
			bad("redis runs without --appendonly yes: a restart would lose queued orders and reports (%q)", r.Command)
		}
		problems = append(problems, redisACLProblems(p, r)...)
	}
	sort.Strings(problems)
	return problems
}

// TestComposeSeparation holds deploy/compose.yaml, alone and with the LLM
// file and every profile, to the separation above.
func TestComposeSeparation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		profiles []string
		files    []string
	}{
		{nil, []string{"compose.yaml"}},
		{[]string{"homeserver", "seed"}, []string{"compose.yaml"}},
		{[]string{"homeserver", "seed"}, []string{"compose.yaml", "compose.llm.yaml"}},
		{nil, []string{"compose.yaml", "compose.rotate-orders.yaml"}},
		{nil, []string{"compose.yaml", "compose.llm.yaml", "compose.rotate-reports.yaml"}},
		{nil, []string{"compose.watchdog.yaml"}},
	} {
		t.Run(strings.Join(append(c.files, c.profiles...), "+"), func(t *testing.T) {
			t.Parallel()
			p := loadCompose(t, c.profiles, c.files...)
			for _, problem := range composeProblems(p) {
				t.Error(problem)
			}
		})
	}
}

// TestComposeSeparationCatchesHostileEdits makes each edit an attacker, or
// a hurried operator, might make to the compose file, and checks that
// composeProblems names it. Without this the separation test could pass
// for a reason that has nothing to do with the file.
func TestComposeSeparationCatchesHostileEdits(t *testing.T) {
	t.Parallel()
	type service = types.ServiceConfig
	str := func(s string) *string { return &s }
	cases := []struct {
		name    string
		service string
		edit    func(*service)
		want    string
	}{
		{"bot gets the SSH key", "nomos-bot", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "ssh_key"})
		}, "nomos-bot mounts secret ssh_key"},
		{"bot gets known_hosts", "nomos-bot", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "known_hosts"})
		}, "nomos-bot mounts secret known_hosts"},
		{"bot gets the order verify key", "nomos-bot", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "orders_verify_key"})
		}, "nomos-bot mounts secret orders_verify_key"},
		{"bot gets the report signing key", "nomos-bot", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "reports_signing_key"})
		}, "nomos-bot mounts secret reports_signing_key"},
		{"bot gets the SSH key under another name", "nomos-bot", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "ssh_key", Target: "pickle_key2"})
		}, "nomos-bot mounts secret ssh_key"},
		{"bot mounts the actuator's journal", "nomos-bot", func(s *service) {
			s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: types.VolumeTypeVolume, Source: "actuator-journal", Target: "/journal"})
		}, "nomos-bot mounts volume actuator-journal"},
		{"bot takes the actuator's volumes", "nomos-bot", func(s *service) {
			s.VolumesFrom = []string{"nomos-actuator"}
		}, "nomos-bot takes volumes_from"},
		{"bot bind-mounts deploy/secrets", "nomos-bot", func(s *service) {
			s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: types.VolumeTypeBind, Source: "/srv/nomos/deploy/secrets", Target: "/secrets", ReadOnly: true})
		}, "nomos-bot bind-mounts /srv/nomos/deploy/secrets"},
		{"actuator gets the Matrix password", "nomos-actuator", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "matrix_password"})
		}, "nomos-actuator mounts secret matrix_password"},
		{"actuator gets the order signing key", "nomos-actuator", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "orders_signing_key"})
		}, "nomos-actuator mounts secret orders_signing_key"},
		{"actuator gets the database", "nomos-actuator", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "database_url"})
		}, "nomos-actuator mounts secret database_url"},
		{"actuator gets the LLM key", "nomos-actuator", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "llm_api_key"})
		}, "nomos-actuator mounts secret llm_api_key"},
		{"actuator joins the database network", "nomos-actuator", func(s *service) {
			s.Networks["db"] = nil
		}, "nomos-actuator joins network db"},
		{"actuator mounts the Docker socket", "nomos-actuator", func(s *service) {
			s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: types.VolumeTypeBind, Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"})
		}, "nomos-actuator bind-mounts /var/run/docker.sock"},
		{"actuator on the host network", "nomos-actuator", func(s *service) {
			s.NetworkMode = "host"
		}, "nomos-actuator shares a namespace"},
		{"actuator privileged", "nomos-actuator", func(s *service) {
			s.Privileged = true
		}, "nomos-actuator is privileged"},
		{"actuator keeps its capabilities", "nomos-actuator", func(s *service) {
			s.CapDrop = nil
		}, "nomos-actuator: want cap_drop"},
		{"actuator as root", "nomos-actuator", func(s *service) {
			s.User = "0:0"
		}, "nomos-actuator runs as root"},
		{"the order verify key path points at a secret not mounted", "nomos-actuator", func(s *service) {
			s.Environment["NOMOS_ORDERS__SIGNING_KEY_FILE"] = str("/run/secrets/orders_signing_key")
		}, "nomos-actuator sets NOMOS_ORDERS__SIGNING_KEY_FILE to /run/secrets/orders_signing_key, a secret it does not mount"},
		{"Matrix password as an environment literal", "nomos-bot", func(s *service) {
			delete(s.Environment, "NOMOS_MATRIX__PASSWORD_FILE")
			s.Environment["NOMOS_MATRIX__PASSWORD"] = str("correct horse battery staple")
		}, "nomos-bot has a secret in its environment (NOMOS_MATRIX__PASSWORD)"},
		{"database URL with its password", "nomos-bot", func(s *service) {
			s.Environment["NOMOS_DATABASE__URL"] = str("postgres://nomos:s3cret@postgres:5432/nomos")
		}, "nomos-bot has a secret in its environment (NOMOS_DATABASE__URL)"},
		{"an API key pasted under an innocent name", "nomos-bot", func(s *service) {
			s.Environment["NOMOS_LLM__HEADERS__X_ROUTE"] = str("sk-or-v1-0a1b2c3d4e5f60718293a4b5c6d7e8f9")
		}, "nomos-bot has a secret in its environment (NOMOS_LLM__HEADERS__X_ROUTE)"},
		{"a _FILE key pointing into the host", "nomos-bot", func(s *service) {
			s.Environment["NOMOS_LLM__API_KEY_FILE"] = str("/etc/nomos/llm_api_key")
		}, "neither a mounted secret nor its own volume"},
		{"Redis password on the command line", "redis", func(s *service) {
			s.Command = append(s.Command, "--requirepass", "s3cret")
		}, "redis has a secret on its command line"},
		{"Redis without the append-only file", "redis", func(s *service) {
			s.Command = types.ShellCommand{"redis-server", "--aclfile", "/data/users.acl"}
		}, "redis runs without --appendonly yes"},
		{"Redis without its ACL users", "redis", func(s *service) {
			s.Command = types.ShellCommand{"redis-server", "--appendonly", "yes"}
		}, "redis runs without its ACL users"},
		{"Redis loads an ACL file acl.sh does not build", "redis", func(s *service) {
			s.Command = types.ShellCommand{"redis-server", "--aclfile", "/data/other.acl", "--appendonly", "yes"}
		}, "redis's entrypoint does not build /data/other.acl"},
		{"the actuator's Redis user has no password", "redis", func(s *service) {
			s.Entrypoint = slices.DeleteFunc(slices.Clone(s.Entrypoint), func(a string) bool { return strings.HasPrefix(a, "nomos-actuator=") })
		}, "redis gives Redis user nomos-actuator, the one nomos-actuator logs in as, no password"},
		{"the actuator logs in as the bot", "nomos-actuator", func(s *service) {
			s.Secrets = append(s.Secrets, types.ServiceSecretConfig{Source: "bot_redis_url"})
			s.Environment["NOMOS_REDIS__URL_FILE"] = str("/run/secrets/bot_redis_url")
		}, "nomos-actuator mounts secret bot_redis_url, which only [nomos-bot] may read"},
		{"a password for a user the ACL file lacks", "redis", func(s *service) {
			s.Entrypoint = slices.Insert(slices.Clone(s.Entrypoint), 5, "nomos-actuator-east=/run/secrets/redis_actuator_password")
		}, "a user deploy/redis/users.acl does not have"},
		{"the bot gets the ACL file", "nomos-bot", func(s *service) {
			s.Configs = append(s.Configs, types.ServiceConfigObjConfig{Source: "redis_users_acl"})
		}, "nomos-bot mounts config redis_users_acl"},
		{"bot starts before migrations finish", "nomos-bot", func(s *service) {
			s.DependsOn["nomos-migrate"] = types.ServiceDependency{Condition: types.ServiceConditionStarted, Required: true}
		}, "nomos-bot must wait for nomos-migrate"},
		{"bot does not wait for Postgres", "nomos-bot", func(s *service) {
			delete(s.DependsOn, "postgres")
		}, "nomos-bot must wait for postgres"},
		{"Postgres loses its health check", "postgres", func(s *service) {
			s.HealthCheck = &types.HealthCheckConfig{Disable: true}
		}, "nomos-bot waits for postgres to be healthy, but postgres has no health check"},
		{"actuator checked by version only", "nomos-actuator", func(s *service) {
			s.HealthCheck.Test = types.HealthCheckTest{"CMD", "/usr/local/bin/nomos", "version"}
		}, "nomos-actuator's health check does not fetch"},
		{"actuator killed before its grace", "nomos-actuator", func(s *service) {
			d := types.Duration(10 * time.Second)
			s.StopGracePeriod = &d
		}, "nomos-actuator's stop_grace_period is not longer"},
		{"Redis on latest", "redis", func(s *service) {
			s.Image = "redis:latest"
		}, "redis runs image \"redis:latest\""},
		{"Postgres untagged", "postgres", func(s *service) {
			s.Image = "docker.io/library/postgres"
		}, "postgres runs image \"docker.io/library/postgres\""},
		{"migrate restarts forever", "nomos-migrate", func(s *service) {
			s.Restart = types.RestartPolicyUnlessStopped
		}, "nomos-migrate is a one-shot"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := loadCompose(t, nil, "compose.yaml")
			svc, ok := p.Services[c.service]
			if !ok {
				t.Fatalf("no service %s", c.service)
			}
			c.edit(&svc)
			p.Services[c.service] = svc
			problems := composeProblems(p)
			if !slices.ContainsFunc(problems, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("the edit went unnoticed: want a problem containing %q, got:\n%s", c.want, strings.Join(problems, "\n"))
			}
		})
	}
}

// TestComposeHomeserverProfile checks that the homeserver is there for who
// asks and off by default, and that the bot then waits for it.
func TestComposeHomeserverProfile(t *testing.T) {
	t.Parallel()
	def := loadCompose(t, nil, "compose.yaml")
	for _, off := range []string{"homeserver", "nomos-seed"} {
		if _, on := def.Services[off]; on {
			t.Errorf("%s starts by default; want it behind its profile", off)
		}
		if _, known := def.DisabledServices[off]; !known {
			t.Errorf("%s is not in the compose file", off)
		}
	}
	if _, ok := def.Services["nomos-bot"]; !ok {
		t.Fatal("nomos-bot does not start by default")
	}

	p := loadCompose(t, []string{"homeserver"}, "compose.yaml")
	hs, ok := p.Services["homeserver"]
	if !ok {
		t.Fatal("the homeserver profile does not start a homeserver")
	}
	if !strings.HasPrefix(hs.Image, "matrixdotorg/synapse:") {
		t.Errorf("homeserver image %s; docs/install.md argues for Synapse", hs.Image)
	}
	dep, ok := p.Services["nomos-bot"].DependsOn["homeserver"]
	if !ok || dep.Condition != types.ServiceConditionHealthy || dep.Required {
		t.Errorf("nomos-bot depends_on homeserver = %+v; want service_healthy, required: false", dep)
	}
}

// TestComposeRolesStartWithTheirSecrets gives each nomos service exactly
// the secrets and volumes compose would mount, at temporary paths, and
// runs the config loader and the validation its role runs at start. A
// role missing a secret it needs, or reading one it was not given, fails
// here as it would on `docker compose up`.
func TestComposeRolesStartWithTheirSecrets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		service string
		files   []string
		check   func(*testing.T, *config.Config)
	}{
		{"nomos-migrate", []string{"compose.yaml"}, nil},
		{"nomos-seed", []string{"compose.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Seeds.Dir == "" {
				t.Error("nomos-seed would seed the embedded demo homelab into a real database")
			}
		}},
		{"nomos-bot", []string{"compose.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Actuator.SSHKeyFile != "" || c.Orders.VerifyKeyFile != "" {
				t.Errorf("the bot's config names actuator material: %+v %+v", c.Actuator, c.Orders)
			}
			if c.LLM.Model != "" {
				t.Errorf("llm.model %q without compose.llm.yaml", c.LLM.Model)
			}
		}},
		{"nomos-bot", []string{"compose.yaml", "compose.llm.yaml"}, func(t *testing.T, c *config.Config) {
			if c.LLM.APIKey == "" || c.LLM.Model == "" {
				t.Errorf("compose.llm.yaml does not give the bot an LLM: model %q, key set %v", c.LLM.Model, c.LLM.APIKey != "")
			}
		}},
		{"nomos-actuator", []string{"compose.yaml", "compose.rotate-orders.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Orders.PreviousVerifyKeyFile == "" {
				t.Error("compose.rotate-orders.yaml does not give the actuator the previous order key")
			}
		}},
		{"nomos-bot", []string{"compose.yaml", "compose.rotate-reports.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Reports.PreviousVerifyKeyFile == "" {
				t.Error("compose.rotate-reports.yaml does not give the bot the previous report key")
			}
		}},
		{"nomos-watchdog", []string{"compose.watchdog.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Database.URL != "" || c.Redis.URL != "" || c.Matrix.Password != "" || c.Actuator.SSHKeyFile != "" || c.Orders.SigningKeyFile != "" {
				t.Error("the watchdog's config holds the stack's material")
			}
			if c.Watchdog.LANURL == c.Watchdog.MeshURL || c.Watchdog.Password == "" {
				t.Errorf("the watchdog lacks its two paths or its password: %+v", c.Watchdog)
			}
		}},
		{"nomos-actuator", []string{"compose.yaml"}, func(t *testing.T, c *config.Config) {
			if c.Database.URL != "" || c.Matrix.Password != "" || c.Matrix.PickleKey != "" || c.LLM.APIKey != "" || c.Orders.SigningKeyFile != "" {
				t.Error("the actuator's config holds bot material")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.service+"+"+strings.Join(c.files, "+"), func(t *testing.T) {
			t.Parallel()
			p := loadCompose(t, []string{"seed"}, c.files...)
			svc, ok := p.Services[c.service]
			if !ok {
				t.Fatalf("no service %s", c.service)
			}
			if len(svc.Command) == 0 {
				t.Fatalf("%s has no command, want its role", c.service)
			}
			role := svc.Command[0]
			root := t.TempDir()
			for _, s := range svc.Secrets {
				writeFakeSecret(t, filepath.Join(root, "run/secrets", s.Source), s.Source)
			}
			var environ []string
			for key, value := range svc.Environment {
				v := ""
				if value != nil {
					v = *value
				}
				if strings.HasPrefix(v, "/") {
					v = filepath.Join(root, v)
				}
				environ = append(environ, key+"="+v)
			}
			cfg, err := config.Load("", environ)
			if err != nil {
				t.Fatalf("%s would not start: %v", c.service, err)
			}
			if err := cfg.Validate(role); err != nil {
				t.Fatalf("%s would not start: %v", c.service, err)
			}
			if c.check != nil {
				c.check(t, cfg)
			}
		})
	}
}
