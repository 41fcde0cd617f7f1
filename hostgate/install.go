package hostgate

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Where Proxmox VE keeps root's keys. pve-cluster makes
// /root/.ssh/authorized_keys a symlink to the cluster-wide file in
// /etc/pve (PVE::Cluster::Setup::setup_ssh_keys), which pmxcfs shares
// with every node, so one line there authorizes a key on all of them.
const (
	DefaultAuthorizedKeys = "/root/.ssh/authorized_keys"
	DefaultBinary         = "/usr/local/bin/nomos"
	clusterDir            = "/etc/pve"
	clusterNodesDir       = "/etc/pve/nodes"
	// nodeMarker is written, on a cluster, into the installing node's own
	// directory of /etc/pve, so that any node can tell which nodes have
	// installed the gate and where their binary is.
	nodeMarker = "nomos-gate"
)

// InstallConfig is one installation of the gate's line in root's
// authorized_keys.
type InstallConfig struct {
	// Root is the directory taken as the node's /: "" means /. Tests
	// give a temporary directory; an absolute symlink inside it is read
	// as relative to it.
	Root string
	// PublicKey is the actuator's public key as ssh-keygen writes it:
	// type, base64 and an optional comment. Required.
	PublicKey string
	// Binary is where the nomos binary is on every node. Default
	// DefaultBinary.
	Binary string
	// From, when set, limits the key to these client addresses (sshd's
	// from= patterns, such as 192.168.1.5 or 10.0.0.0/24).
	From string
	// AuthorizedKeys is root's authorized_keys. Default
	// DefaultAuthorizedKeys.
	AuthorizedKeys string
	// Node is this node's name, as in /etc/pve/nodes. Default the short
	// host name.
	Node string
	// DryRun says what would change and changes nothing.
	DryRun bool
	// Out receives what is done, a line at a time. Required.
	Out io.Writer
	// Now stamps the node's marker. Default time.Now.
	Now func() time.Time
}

// Install outcomes for the key's line.
const (
	LineAdded     = "added"
	LineUnchanged = "unchanged"
	LineReplaced  = "replaced"
)

// InstallReport is what Install did or, with DryRun, would do.
type InstallReport struct {
	// File is the authorized_keys written, symlinks resolved, as the node
	// sees it.
	File string
	// Shared is true when File is the cluster-wide one in /etc/pve.
	Shared bool
	// Line is LineAdded, LineUnchanged or LineReplaced.
	Line string
	// Nodes are the cluster's nodes and what is known here of each one's
	// binary; empty on a node outside a cluster.
	Nodes []NodeBinary
}

// NodeBinary is what one node of the cluster is known to have.
type NodeBinary struct {
	Name string
	// This is the node Install ran on.
	This bool
	// Known is false when nothing here says whether the node has the
	// binary: only this node's disk, and the markers nodes leave in
	// /etc/pve, can be read locally.
	Known bool
	// Installed is, when Known, whether the binary is at the path.
	Installed bool
	// Note says where the answer comes from.
	Note string
}

// Missing lists the nodes known to lack the binary.
func (r InstallReport) Missing() []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Known && !n.Installed {
			out = append(out, n.Name)
		}
	}
	return out
}

var (
	keyTypes = []string{"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
		"sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com"}
	commentRE = regexp.MustCompile(`^[A-Za-z0-9@._+:=/-]*( [A-Za-z0-9@._+:=/-]+)*$`)
	fromRE    = regexp.MustCompile(`^!?[A-Za-z0-9.:*?/-]+(,!?[A-Za-z0-9.:*?/-]+)*$`)
)

// publicKey is the actuator's key: type, base64 and comment.
type publicKey struct{ typ, blob, comment string }

func parsePublicKey(s string) (publicKey, error) {
	f := strings.Fields(strings.TrimSpace(s))
	if len(f) < 2 || !slices.Contains(keyTypes, f[0]) {
		return publicKey{}, errors.New("the public key must be one line as ssh-keygen writes it: TYPE BASE64 [COMMENT], such as ssh-ed25519 AAAA… nomos-actuator, without options")
	}
	if _, err := base64.StdEncoding.DecodeString(f[1]); err != nil || len(f[1]) < 40 {
		return publicKey{}, fmt.Errorf("the public key's %s part is not base64", f[0])
	}
	comment := strings.Join(f[2:], " ")
	if !commentRE.MatchString(comment) {
		return publicKey{}, fmt.Errorf("the public key's comment %s holds characters other than letters, digits and @._+:=/-", q(comment))
	}
	return publicKey{typ: f[0], blob: f[1], comment: comment}, nil
}

// gateOptions are the options of the gate's line: no forwarding, no
// terminal, the client's addresses if given, and the forced command.
func gateOptions(binary, from string) string {
	opts := "restrict"
	if from != "" {
		opts += `,from="` + from + `"`
	}
	return opts + `,command="` + binary + ` gate"`
}

func (k publicKey) line(options string) string {
	return strings.TrimSpace(options + " " + k.typ + " " + k.blob + " " + k.comment)
}

// keyLine splits an authorized_keys line into its options and the key's
// type and base64, as sshd reads it: options are everything before the
// key type, and may hold double-quoted strings with spaces. ok is false
// for blank lines, comments and lines it cannot read.
func keyLine(line string) (options, typ, blob string, ok bool) {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return "", "", "", false
	}
	if f := strings.Fields(s); slices.Contains(keyTypes, f[0]) && len(f) >= 2 {
		return "", f[0], f[1], true
	}
	quoted := false
	i := 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted && i+1 < len(s):
			i++
		case c == '"':
			quoted = !quoted
		case (c == ' ' || c == '\t') && !quoted:
			f := strings.Fields(s[i:])
			if len(f) < 2 {
				return "", "", "", false
			}
			return s[:i], f[0], f[1], true
		}
	}
	return "", "", "", false
}

// Install puts the gate's forced-command line for the actuator's key into
// root's authorized_keys, once. It follows the file's symlink (on Proxmox
// VE, to the cluster-wide /etc/pve/priv/authorized_keys), keeps every
// other line and the file's mode, adds the line only when no line holds
// the key, and replaces a line for the key with other options, saying
// what they were. The file is replaced atomically. It then reports the
// cluster's nodes and which of them are known to lack the binary.
func Install(cfg InstallConfig) (InstallReport, error) {
	cfg.Root = cmp.Or(cfg.Root, "/")
	cfg.Binary = cmp.Or(cfg.Binary, DefaultBinary)
	cfg.AuthorizedKeys = cmp.Or(cfg.AuthorizedKeys, DefaultAuthorizedKeys)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return InstallReport{}, fmt.Errorf("this node's name: %w; give it with -node", err)
		}
		cfg.Node, _, _ = strings.Cut(h, ".")
	}
	key, err := parsePublicKey(cfg.PublicKey)
	if err != nil {
		return InstallReport{}, err
	}
	switch {
	case !filepath.IsAbs(cfg.Binary) || filepath.Clean(cfg.Binary) != cfg.Binary || !pathRE.MatchString(cfg.Binary):
		return InstallReport{}, fmt.Errorf("the binary's path %s must be absolute and clean, of letters, digits and ._-/", q(cfg.Binary))
	case cfg.From != "" && !fromRE.MatchString(cfg.From):
		return InstallReport{}, fmt.Errorf("from %s must be sshd address patterns separated by commas, such as 192.168.1.5 or 10.0.0.0/24", q(cfg.From))
	case !filepath.IsAbs(cfg.AuthorizedKeys):
		return InstallReport{}, fmt.Errorf("authorized_keys %s must be an absolute path", q(cfg.AuthorizedKeys))
	}
	say := func(format string, a ...any) { fmt.Fprintf(cfg.Out, format+"\n", a...) }
	be := "is"
	if cfg.DryRun {
		be = "would be"
	}

	file, err := resolve(cfg.Root, cfg.AuthorizedKeys)
	if err != nil {
		return InstallReport{}, err
	}
	rep := InstallReport{File: file, Shared: strings.HasPrefix(file, clusterDir+"/")}
	if file != cfg.AuthorizedKeys {
		say("%s is a link to %s.", cfg.AuthorizedKeys, file)
	}
	if rep.Shared {
		say("%s is the cluster's shared file (pmxcfs keeps one copy for every node), so the line, installed once, applies to every node of the cluster: "+
			"each of them needs the nomos binary at %s, or it refuses every command from the actuator's key.", file, cfg.Binary)
	}

	real := filepath.Join(cfg.Root, file)
	old, mode, owner, err := readKeys(real)
	if err != nil {
		return InstallReport{}, err
	}
	want := key.line(gateOptions(cfg.Binary, cfg.From))
	var out []string
	found := false
	for _, l := range splitLines(old) {
		opts, typ, blob, ok := keyLine(l)
		if !ok || typ != key.typ || blob != key.blob {
			out = append(out, l)
			continue
		}
		switch {
		case found:
			say("A second line for the key %s removed: %s", be, q(l))
			rep.Line = LineReplaced
		case opts == gateOptions(cfg.Binary, cfg.From):
			found = true
			out = append(out, l)
			rep.Line = cmp.Or(rep.Line, LineUnchanged)
		default:
			found = true
			out = append(out, want)
			rep.Line = LineReplaced
			if opts == "" {
				say("The line for this key had no forced command, so the key was a root shell; it %s replaced with the gate's.", be)
			} else {
				say("The line for this key had other options (%s); it %s replaced with the gate's.", opts, be)
			}
		}
	}
	if !found {
		out = append(out, want)
		rep.Line = LineAdded
	}
	switch rep.Line {
	case LineUnchanged:
		say("The gate's line for this key is already there; %s is unchanged.", file)
	case LineAdded:
		say("The gate's line %s added to %s:\n  %s", be, file, want)
	default:
		say("The gate's line in %s %s now:\n  %s", file, be, want)
	}
	if rep.Line != LineUnchanged && !cfg.DryRun {
		if err := writeAtomic(real, []byte(strings.Join(out, "\n")+"\n"), mode, owner); err != nil {
			return InstallReport{}, err
		}
	}
	if !rep.Shared {
		say("This file is this node's own: install the line on each node of a cluster whose authorized_keys is not the shared one.")
	}
	if err := nodes(cfg, &rep, say); err != nil {
		return InstallReport{}, err
	}
	return rep, nil
}

// resolve follows p's symlinks, reading an absolute target as under root,
// and returns the final path as the node sees it.
func resolve(root, p string) (string, error) {
	for range 16 {
		target, err := os.Readlink(filepath.Join(root, p))
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EINVAL):
			return p, nil
		case err != nil:
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	return "", fmt.Errorf("%s: too many levels of symlinks", p)
}

// readKeys reads an authorized_keys file, or nothing if there is none
// yet, which is then made mode 0600.
func readKeys(p string) (data []byte, mode fs.FileMode, owner *syscall.Stat_t, err error) {
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o600, nil, nil
	}
	if err != nil {
		return nil, 0, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, nil, fmt.Errorf("%s is not a regular file", p)
	}
	data, err = os.ReadFile(p)
	if err != nil {
		return nil, 0, nil, err
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	return data, info.Mode().Perm(), st, nil
}

func splitLines(data []byte) []string {
	s := strings.TrimSuffix(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// writeAtomic replaces p with data through a temporary file in its own
// directory, with mode and, when it can tell, p's owner: on pmxcfs too,
// which allows a rename within a directory and chmod to the mode its files
// already have.
func writeAtomic(p string, data []byte, mode fs.FileMode, owner *syscall.Stat_t) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".nomos-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	if owner != nil {
		if info, err := os.Stat(tmp.Name()); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && (st.Uid != owner.Uid || st.Gid != owner.Gid) {
				if err := os.Lchown(tmp.Name(), int(owner.Uid), int(owner.Gid)); err != nil {
					return fmt.Errorf("give %s its owner back: %w", p, err)
				}
			}
		}
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	// Best effort: not every file system (pmxcfs among them) syncs a
	// directory, and the file itself is synced.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// nodes reports the cluster's nodes (the directories of /etc/pve/nodes)
// and what is known here of each one's binary: this node's from its own
// disk, another's from the marker its own install left, and on a cluster
// leaves this node's marker for the others.
func nodes(cfg InstallConfig, rep *InstallReport, say func(string, ...any)) error {
	entries, err := os.ReadDir(filepath.Join(cfg.Root, clusterNodesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := os.Stat(filepath.Join(cfg.Root, cfg.Binary))
	here := err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n := NodeBinary{Name: e.Name(), This: e.Name() == cfg.Node}
		switch {
		case n.This:
			n.Known, n.Installed = true, here
			n.Note = "this node"
		default:
			data, err := os.ReadFile(filepath.Join(cfg.Root, clusterNodesDir, e.Name(), nodeMarker))
			if err == nil {
				binary, at := readMarker(string(data))
				n.Known = binary == cfg.Binary
				n.Installed = n.Known
				n.Note = fmt.Sprintf("its own nomos gate -install recorded %s at %s", binary, at)
				if !n.Known {
					n.Note += ", not at " + cfg.Binary
				}
			}
		}
		rep.Nodes = append(rep.Nodes, n)
	}
	if !slices.ContainsFunc(rep.Nodes, func(n NodeBinary) bool { return n.This }) {
		say("This node, %s, is not among the cluster's nodes in %s; give its name with -node.", cfg.Node, clusterNodesDir)
	}
	if len(rep.Nodes) > 0 {
		say("The cluster's nodes, from %s:", clusterNodesDir)
	}
	for _, n := range rep.Nodes {
		switch {
		case n.Known && n.Installed:
			say("  ✓ %s: nomos is at %s (%s)", n.Name, cfg.Binary, n.Note)
		case n.Known:
			say("  ✗ %s: no nomos at %s (%s): sshd cannot run the gate there, so that node refuses every command from the actuator's key; install the binary there", n.Name, cfg.Binary, n.Note)
		default:
			say("  ? %s: not known from here whether nomos is at %s; run nomos gate -install there too (the shared line stays as it is), or see nomos doctor's host lines", n.Name, cfg.Binary)
		}
	}
	if rep.Shared && here && !cfg.DryRun {
		marker := fmt.Sprintf("binary %s\ninstalled %s\n", cfg.Binary, cfg.Now().UTC().Format(time.RFC3339))
		p := filepath.Join(cfg.Root, clusterNodesDir, cfg.Node, nodeMarker)
		if _, err := os.Stat(filepath.Dir(p)); err == nil {
			if err := writeAtomic(p, []byte(marker), 0o640, nil); err != nil {
				return fmt.Errorf("record this node's binary in %s: %w", filepath.Join(clusterNodesDir, cfg.Node, nodeMarker), err)
			}
		}
	}
	return nil
}

// readMarker reads a node's marker: the binary's path and when.
func readMarker(s string) (binary, at string) {
	for _, l := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "binary":
			binary = v
		case "installed":
			at = v
		}
	}
	return binary, cmp.Or(at, "an unknown time")
}
