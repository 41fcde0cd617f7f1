package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/internal/humantime"
	"github.com/nomoshq/nomos/store"
	"github.com/nomoshq/nomos/tasks"
)

func (d *doctor) checkOrderKeys(context.Context) []checkLine {
	return []checkLine{checkKeyPair("order keys", "orders", d.cfg.Orders.SigningKeyFile, d.cfg.Orders.VerifyKeyFile, "the actuator would refuse every order and probe")}
}

func (d *doctor) checkReportKeys(context.Context) []checkLine {
	return []checkLine{checkKeyPair("report keys", "reports", d.cfg.Reports.SigningKeyFile, d.cfg.Reports.VerifyKeyFile, "the bot would refuse every result and probe result")}
}

// checkKeyPair loads whichever halves of an Ed25519 pair are on this
// machine and, when both are, signs a nonce with one and verifies it with
// the other.
func checkKeyPair(label, prefix, signingFile, verifyFile, consequence string) checkLine {
	signKey, verifyKey := prefix+".signing_key_file", prefix+".verify_key_file"
	var priv ed25519.PrivateKey
	var pub ed25519.PublicKey
	var err error
	if signingFile != "" {
		if priv, err = tasks.LoadSigningKey(signingFile); err != nil {
			return fail(label+": "+signKey+": "+err.Error(), "point "+signKey+" at an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519 -out FILE)")
		}
	}
	if verifyFile != "" {
		if pub, err = tasks.LoadVerifyKey(verifyFile); err != nil {
			return fail(label+": "+verifyKey+": "+err.Error(), "point "+verifyKey+" at the public half of "+signKey+" (openssl pkey -in SIGNING_KEY -pubout -out FILE)")
		}
	}
	switch {
	case priv == nil:
		return pass(label + ": " + verifyKey + " loads; its signing half is on the other side")
	case pub == nil:
		return pass(label + ": " + signKey + " loads; its verify half is on the other side")
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	if !ed25519.Verify(pub, nonce, ed25519.Sign(priv, nonce)) {
		return fail(fmt.Sprintf("%s: %s and %s are not a pair: %s", label, signKey, verifyKey, consequence),
			fmt.Sprintf("write the public half of the signing key to the verify key file: openssl pkey -in %s -pubout -out %s", signingFile, verifyFile))
	}
	return pass(fmt.Sprintf("%s: %s and %s are a pair", label, signKey, verifyKey))
}

// checkSSH checks the actuator's SSH material: its key loads without a
// passphrase and known_hosts pins at least one host key.
func (d *doctor) checkSSH(context.Context) []checkLine {
	a := d.cfg.Actuator
	var lines []checkLine
	if a.SSHKeyFile != "" {
		signer, err := loadSSHKey(a.SSHKeyFile)
		if err != nil {
			lines = append(lines, fail("ssh key: "+err.Error(), "point actuator.ssh_key_file at a private key without a passphrase (ssh-keygen -t ed25519 -N '' -f FILE)"))
		} else {
			lines = append(lines, pass(fmt.Sprintf("ssh key: %s loads (%s %s)", a.SSHKeyFile, signer.PublicKey().Type(), ssh.FingerprintSHA256(signer.PublicKey()))))
		}
	}
	if a.KnownHostsFile != "" {
		n, err := countKnownHosts(a.KnownHostsFile)
		pin := "pin each host's key: ssh-keyscan -p PORT HOST >> " + a.KnownHostsFile + ", after checking its fingerprint (ssh-keygen -lf) against the one the host shows"
		switch {
		case err != nil:
			lines = append(lines, fail("known_hosts: "+err.Error(), pin))
		case n == 0:
			lines = append(lines, fail("known_hosts: "+a.KnownHostsFile+" pins no host key, so the actuator reaches no host", pin))
		default:
			lines = append(lines, pass(fmt.Sprintf("known_hosts: %s pins %d host keys", a.KnownHostsFile, n)))
		}
	}
	return lines
}

func countKnownHosts(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for len(data) > 0 {
		var rest []byte
		_, _, _, _, rest, err = ssh.ParseKnownHosts(data)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		n++
		data = rest
	}
	return n, nil
}

// gateMissing matches what a node's shell says when the forced command
// of the actuator's key, nomos gate, is not there: bash ("line 1: …: No
// such file or directory") or dash ("…: not found"), with exit 127.
var gateMissing = regexp.MustCompile(`sh: (line )?1: /\S*/nomos: (No such file or directory|not found)`)

// probeUnreachable opens the detail of a probe the actuator could not
// get to the host (actuator/probe.go): no connection, a refused host key,
// a session that broke.
const probeUnreachable = "the probe could not run:"

// checkHosts reports, for every host, whether the actuator reaches it.
// The doctor holds no SSH key and sends nothing itself: the prober already
// runs a check through every host on its schedule, signed like an order,
// and the actuator's signed results land in Postgres, so the newest
// result per host is the answer.
func (d *doctor) checkHosts(ctx context.Context) []checkLine {
	st, err := store.Open(ctx, store.Config{URL: d.cfg.Database.URL, MaxConns: 2, Logger: d.logger})
	if err != nil {
		return []checkLine{fail("hosts: cannot open the database: "+err.Error(), "see the postgres line")}
	}
	defer st.Close()
	hosts, err := st.HostProbes(ctx)
	if err != nil {
		return []checkLine{fail("hosts: cannot read the fleet: "+err.Error(), "run `nomos migrate` with this config")}
	}
	if len(hosts) == 0 {
		return []checkLine{fail("hosts: the fleet has no hosts", "describe your hosts in the seed files and run `nomos seed` (seeds.dir)")}
	}
	now := d.now()
	var lines []checkLine
	for _, h := range hosts {
		name := "host " + h.Name
		if h.SSH != "" {
			name += " (" + h.SSH + ")"
		}
		switch {
		case h.SSH == "":
			lines = append(lines, fail(name+": has no ssh address in the fleet data", "set ssh: HOST:22 for it in the seed files and run `nomos seed`"))
		case h.Checks == 0:
			lines = append(lines, fail(name+": no enabled check runs through it, so nothing shows the actuator reaches it",
				"add a check on the host or one of its containers to the seed files, such as {slug: "+h.Name+"-disk, target: "+h.Slug+", kind: disk}, and run `nomos seed`"))
		case h.At == nil:
			lines = append(lines, fail(name+": no probe result yet",
				"start the bot (checks.enabled) and the actuator with the same redis.url and actuator.name; the first results come within seconds. "+
					"A host of another site is probed by that site's actuator (actuator.site, docs/operations.md \"Sites\")"))
		case now.Sub(*h.At) > store.StaleAge(h.MinInterval):
			lines = append(lines, fail(fmt.Sprintf("%s: the newest probe result is %s old", name, humantime.Duration(now.Sub(*h.At))),
				"is the actuator running (the one of this host's site), with the same redis.url and actuator.name as the bot? its log says why probes stopped"))
		case gateMissing.MatchString(h.Detail):
			lines = append(lines, fail(fmt.Sprintf("%s: the gate binary is missing on that node: sshd cannot run its forced command, so it refuses everything from the actuator's key (%s, %s ago: %s)",
				name, h.Check, humantime.Duration(now.Sub(*h.At)), strings.TrimSpace(strings.TrimPrefix(h.Detail, probeUnreachable))),
				"install nomos on that node at the path of command= in its authorized_keys, then run nomos gate -install there (docs/install.md, \"Install nomos gate on each node\"); "+
					"on a Proxmox cluster the line is shared by every node, so every node needs the binary"))
		case strings.HasPrefix(h.Detail, probeUnreachable):
			fix := "check the address, that sshd runs on the host, and that the actuator's key is in its authorized_keys"
			if strings.Contains(h.Detail, "host key") || strings.Contains(h.Detail, "known_hosts") {
				fix = "pin the host's key in the actuator's known_hosts after checking its fingerprint on the host (ssh-keyscan, ssh-keygen -lf)"
			}
			lines = append(lines, fail(fmt.Sprintf("%s: the actuator cannot reach it (%s, %s ago): %s", name, h.Check, humantime.Duration(now.Sub(*h.At)), strings.TrimSpace(strings.TrimPrefix(h.Detail, probeUnreachable))), fix))
		default:
			lines = append(lines, pass(fmt.Sprintf("%s: the actuator reaches it with its pinned key (probe %s, %s ago: %s)", name, h.Check, humantime.Duration(now.Sub(*h.At)), h.Health)))
		}
	}
	return lines
}
