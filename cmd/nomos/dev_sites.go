//go:build nomosdev

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"

	"github.com/nomoshq/nomos/internal/fleetseed"
	"github.com/nomoshq/nomos/tasks"
)

// devSite is one extra site of `nomos dev -sites N`: the first site is
// the default one, served by the stack's own actuator; each other gets an
// actuator of its own, with its own SSH key, journal, config and log.
type devSite struct {
	name   string
	dir    string
	sshKey string
	config string
}

// devSiteName is the name of site i (from 0) of a stack of several.
func devSiteName(i int) string {
	if i == 0 {
		return tasks.DefaultSite
	}
	return "site-" + strconv.Itoa(i+1)
}

// assignDevSites spreads the seed's hosts over n sites in turn and
// returns the sites past the default one. With n of 1 or less it changes
// nothing.
func assignDevSites(seed *fleetseed.Seed, n int) []string {
	if n <= 1 {
		return nil
	}
	var extra []string
	for i := range seed.Hosts {
		site := devSiteName(i % n)
		seed.Hosts[i].Site = site
		if i%n != 0 && i < n {
			extra = append(extra, site)
		}
	}
	return extra
}

// ensureDevSiteKeys creates each extra site's SSH key once and returns
// the sites and the authorized_keys file labsim should read: the stack's
// own with every site's key added. In the demo every site's key opens
// every host; on a real fleet each site's key is authorized on its own
// nodes only.
func ensureDevSiteKeys(dir string, keys devKeys, names []string) ([]devSite, string, error) {
	if len(names) == 0 {
		return nil, keys.authorizedKeys, nil
	}
	authorized, err := os.ReadFile(keys.authorizedKeys)
	if err != nil {
		return nil, "", fmt.Errorf("dev sites: %w", err)
	}
	var sites []devSite
	for _, name := range names {
		s := devSite{name: name, dir: filepath.Join(dir, "sites", name)}
		s.sshKey = filepath.Join(s.dir, "actuator_ed25519")
		line, err := ensureDevSSHKey(s.sshKey, "nomos actuator of "+name+" (dev)")
		if err != nil {
			return nil, "", fmt.Errorf("dev site %s: %w", name, err)
		}
		authorized = append(authorized, line...)
		sites = append(sites, s)
	}
	path := keys.authorizedKeys + ".sites"
	if err := os.WriteFile(path, authorized, 0o600); err != nil { //nolint:gosec // G703: the dev stack's own state directory, not input
		return nil, "", fmt.Errorf("dev sites: %w", err)
	}
	return sites, path, nil
}

// writeDevSiteConfigs writes each extra site's config: the stack's own,
// with the actuator section its site's.
func writeDevSiteConfigs(sites []devSite, keys devKeys, mainConfig string) error {
	base, err := os.ReadFile(mainConfig)
	if err != nil {
		return fmt.Errorf("dev sites: %w", err)
	}
	for i, s := range sites {
		var cfg map[string]any
		if err := yaml.Unmarshal(base, &cfg); err != nil {
			return fmt.Errorf("dev site %s: %w", s.name, err)
		}
		cfg["actuator"] = map[string]any{
			"site":             s.name,
			"ssh_key_file":     s.sshKey,
			"known_hosts_file": keys.knownHosts,
			"journal_file":     filepath.Join(s.dir, "journal"),
		}
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("dev site %s: %w", s.name, err)
		}
		sites[i].config = filepath.Join(s.dir, "nomos.yaml")
		if err := os.WriteFile(sites[i].config, data, 0o600); err != nil {
			return fmt.Errorf("dev site %s: %w", s.name, err)
		}
	}
	return nil
}

// ensureDevSSHKey creates an SSH key at path once and returns its
// authorized_keys line.
func ensureDevSSHKey(path, comment string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := ssh.MarshalPrivateKey(priv, comment)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	signer, err := loadSSHKey(path)
	if err != nil {
		return nil, err
	}
	return ssh.MarshalAuthorizedKey(signer.PublicKey()), nil
}

// startDevSites starts one actuator per extra site, each logging to its
// site's directory.
func startDevSites(ctx context.Context, self string, sites []devSite, env *roleEnv) ([]*children, error) {
	var out []*children
	for _, s := range sites {
		c, err := startChildren(ctx, self, []string{"actuator"}, s.config, env.environ, s.dir, env)
		if err != nil {
			for _, c := range out {
				c.stop()
			}
			return nil, fmt.Errorf("start the actuator of site %s: %w", s.name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// adopt makes o's processes c's: c.stop stops and waits for them, and a
// failure of one of them is a failure of c.
func (c *children) adopt(o *children) {
	c.procs = append(c.procs, o.procs...)
	relay := func(err error) {
		select {
		case c.failed <- err:
		default: // c has failed already; the stack stops once
		}
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		done := make(chan struct{})
		go func() { o.wg.Wait(); close(done) }()
		select {
		case err := <-o.failed:
			relay(err)
		case <-done:
			select {
			case err := <-o.failed:
				relay(err)
			default:
			}
		}
		<-done
	}()
}

// printDevSites says which actuator serves which hosts, when the stack
// runs several sites.
func printDevSites(w io.Writer, sites []devSite, seed *fleetseed.Seed) {
	if len(sites) == 0 {
		return
	}
	hosts := map[string][]string{}
	for _, h := range seed.Hosts {
		hosts[h.Site] = append(hosts[h.Site], h.Name)
	}
	fmt.Fprintf(w, "Sites: %s (%s) is served by the stack's actuator", tasks.DefaultSite, strings.Join(hosts[tasks.DefaultSite], ", "))
	for _, s := range sites {
		fmt.Fprintf(w, "; %s (%s) by its own, logging to %s", s.name, strings.Join(hosts[s.name], ", "), filepath.Join(s.dir, "actuator.log"))
	}
	fmt.Fprintln(w, ".")
}
