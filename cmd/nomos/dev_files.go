//go:build nomosdev

package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/tasks"
)

// The dev stack's keys and the config its roles run with.

// devKeys are the files the actuator and labsim share in the demo.
type devKeys struct {
	sshKey, authorizedKeys, knownHosts string
	signingKey, verifyKey              string
	reportSigningKey, reportVerifyKey  string
	pickleKey, recoveryKey             string
}

// ensureDevKeys creates the actuator's SSH key, the order key pair and the
// actuator's report key pair once; later runs reuse them, and a stack from
// before the report keys gets them on its next run.
func ensureDevKeys(dir string) (devKeys, error) {
	k := devKeys{
		sshKey:           filepath.Join(dir, "actuator_ed25519"),
		authorizedKeys:   filepath.Join(dir, "authorized_keys"),
		knownHosts:       filepath.Join(dir, "known_hosts"),
		signingKey:       filepath.Join(dir, "orders_signing.key"),
		verifyKey:        filepath.Join(dir, "orders_verify.pub"),
		reportSigningKey: filepath.Join(dir, "reports_signing.key"),
		reportVerifyKey:  filepath.Join(dir, "reports_verify.pub"),
		pickleKey:        filepath.Join(dir, "pickle_key"),
		recoveryKey:      filepath.Join(dir, "recovery_key"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return k, err
	}
	if _, err := os.Stat(k.sshKey); errors.Is(err, os.ErrNotExist) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return k, err
		}
		block, err := ssh.MarshalPrivateKey(priv, "nomos actuator (dev)")
		if err != nil {
			return k, err
		}
		if err := os.WriteFile(k.sshKey, pem.EncodeToMemory(block), 0o600); err != nil {
			return k, err
		}
		sshPub, err := ssh.NewPublicKey(pub)
		if err != nil {
			return k, err
		}
		if err := os.WriteFile(k.authorizedKeys, ssh.MarshalAuthorizedKey(sshPub), 0o600); err != nil {
			return k, err
		}
	}
	if _, err := os.Stat(k.pickleKey); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(k.pickleKey, []byte(randomToken(32)+"\n"), 0o600); err != nil {
			return k, err
		}
	}
	for _, pair := range [][2]string{{k.signingKey, k.verifyKey}, {k.reportSigningKey, k.reportVerifyKey}} {
		if _, err := os.Stat(pair[0]); errors.Is(err, os.ErrNotExist) {
			if err := tasks.GenerateKeyFiles(pair[0], pair[1]); err != nil {
				return k, err
			}
		}
	}
	return k, nil
}

// writeDevConfig writes nomos.yaml, the config the stack's roles run with,
// and returns its path. Secrets go in files of their own under secrets/,
// mode 0600, so the file can be shown and `nomos -config` it works
// without environment variables.
func writeDevConfig(dir string, s devState, k devKeys, webListen string) (string, error) {
	secretDir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		return "", err
	}
	secret := func(name, value string) (string, error) {
		path := filepath.Join(secretDir, name)
		return path, os.WriteFile(path, []byte(value+"\n"), 0o600)
	}
	databaseURL, err := secret("database_url", s.DatabaseURL)
	if err != nil {
		return "", err
	}
	botPassword, err := secret("bot_password", s.Bot.Password)
	if err != nil {
		return "", err
	}
	mcpToken, err := secret("mcp_token", s.MCPToken)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{
		"database": map[string]any{"url_file": databaseURL},
		"redis":    map[string]any{"url": s.RedisURL},
		"matrix": map[string]any{
			"homeserver_url":    s.HomeserverURL,
			"user_id":           s.Bot.UserID,
			"password_file":     botPassword,
			"operators":         []string{s.Operator.UserID},
			"pickle_key_file":   k.pickleKey,
			"recovery_key_file": k.recoveryKey,
			"ops_room":          s.RoomID,
		},
		// A room in the clear takes plans only while verified devices are
		// not required; `nomos dev -e2ee` makes the room encrypted and
		// requires them, as a real deployment does.
		"approvals": map[string]any{"require_verified_device": s.Encrypted},
		"actuator": map[string]any{
			"ssh_key_file":     k.sshKey,
			"known_hosts_file": k.knownHosts,
			"journal_file":     filepath.Join(dir, "actuator", "journal"),
		},
		"orders":  map[string]any{"signing_key_file": k.signingKey, "verify_key_file": k.verifyKey},
		"reports": map[string]any{"signing_key_file": k.reportSigningKey, "verify_key_file": k.reportVerifyKey},
		"web":     map[string]any{"listen": webListen},
		// An admin's container made straight on labsim shows up quickly.
		"inventory": map[string]any{"interval": "15s"},
		"mcp": map[string]any{
			// The dev operator's own token: what it asks for is theirs.
			"tokens":            []map[string]string{{"name": "dev", "token_file": mcpToken, "scope": "request", "for": s.Operator.UserID}},
			"url":               "http://" + webListen + "/mcp",
			"client_token_file": mcpToken,
		},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	const header = "# Written by `nomos dev` on every start: edits are overwritten.\n" +
		"# The roles of the dev stack run with it; NOMOS_ variables you export win.\n" +
		"# Try: nomos -config THIS_FILE doctor, or nomos -config THIS_FILE mcp --stdio\n"
	path := filepath.Join(dir, "nomos.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(header), data...), 0o600); err != nil {
		return "", fmt.Errorf("write nomos.yaml: %w", err)
	}
	return path, os.Rename(tmp, path)
}
