package actuator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrHostKeyChanged means known_hosts already pins another key for a host.
// Pinning never replaces a key: whether the node was reinstalled or
// someone is in the middle is for a person to find out.
var ErrHostKeyChanged = errors.New("another host key is pinned")

// HostKey is the SSH host key a host presented on one connection.
type HostKey struct {
	// Addr is the address as dialled, host:port.
	Addr string
	// Remote is the address that answered.
	Remote *net.TCPAddr
	Key    ssh.PublicKey
}

// hostKeyAlgorithms are asked for in this order: the ed25519 key first,
// which every current OpenSSH, and so every Proxmox node, has.
var hostKeyAlgorithms = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// errGotKey stops a handshake once the host key is in hand: nothing is
// authenticated, and no key of ours is offered.
var errGotKey = errors.New("host key received")

// HostAddr turns HOST or HOST:PORT into host:port, with port 22 by default.
func HostAddr(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, " \t\r\n/@") {
		return "", fmt.Errorf("%q: want a host name or address, with :PORT if not 22", s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port; a bare IPv6 address has colons of its own.
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "22"
		if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("%q: want a host name or address, with :PORT if not 22", s)
		}
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("%q: want a host name or address, with :PORT if not 22", s)
	}
	return net.JoinHostPort(host, port), nil
}

// ScanHostKey connects to addr (host:port) and returns the host key it
// presents, stopping the handshake there: it logs in as no one.
func ScanHostKey(ctx context.Context, addr string, timeout time.Duration) (HostKey, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return HostKey{}, fmt.Errorf("cannot reach %s: %w", addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var got HostKey
	cfg := &ssh.ClientConfig{
		User: "nomos-pin",
		HostKeyCallback: func(_ string, remote net.Addr, key ssh.PublicKey) error {
			tcp, _ := remote.(*net.TCPAddr)
			got = HostKey{Addr: addr, Remote: tcp, Key: key}
			return errGotKey
		},
		HostKeyAlgorithms: hostKeyAlgorithms,
	}
	_, _, _, err = ssh.NewClientConn(conn, addr, cfg)
	if got.Key == nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return HostKey{}, fmt.Errorf("read the host key of %s: %w", addr, err)
	}
	if got.Remote == nil {
		return HostKey{}, fmt.Errorf("read the host key of %s: %v is not a TCP address", addr, conn.RemoteAddr())
	}
	return got, nil
}

// Fingerprint is the key's SHA256 fingerprint, as ssh-keygen -l prints it.
func (k HostKey) Fingerprint() string { return ssh.FingerprintSHA256(k.Key) }

// ConsoleCommand is what to run on the host itself to see the fingerprint
// of the same key.
func (k HostKey) ConsoleCommand() string {
	name := "ed25519"
	switch {
	case strings.HasPrefix(k.Key.Type(), "ecdsa-"):
		name = "ecdsa"
	case k.Key.Type() == ssh.KeyAlgoRSA:
		name = "rsa"
	}
	return "ssh-keygen -lf /etc/ssh/ssh_host_" + name + "_key.pub"
}

// Line is the known_hosts line that pins the key for Addr, as the
// actuator looks it up.
func (k HostKey) Line() string {
	return knownhosts.Line([]string{knownhosts.Normalize(k.Addr)}, k.Key)
}

// Pinned reports whether file pins this key for the host already. It
// returns an error wrapping ErrHostKeyChanged when file pins another key
// for the host (or its address), and false when it pins none. A file that
// does not exist pins nothing.
func (k HostKey) Pinned(file string) (bool, error) {
	check, err := knownhosts.New(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", file, err)
	}
	err = check(k.Addr, k.Remote, k.Key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &re):
		return false, fmt.Errorf("%w: %s presents %s key %s, which %s:%d revokes", ErrHostKeyChanged, k.Addr, k.Key.Type(), k.Fingerprint(), re.Revoked.Filename, re.Revoked.Line)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return false, nil
	case errors.As(err, &ke):
		w := ke.Want[0]
		return false, fmt.Errorf("%w: %s presents %s key %s, but %s pins %s key %s for it at line %d. "+
			"Either the node was reinstalled or someone is in the middle: compare `%s` on the node's console with the key it presents now; "+
			"only if they match, remove the old line (ssh-keygen -R %s -f %s) and pin again",
			ErrHostKeyChanged, k.Addr, k.Key.Type(), k.Fingerprint(), w.Filename, w.Key.Type(), ssh.FingerprintSHA256(w.Key), w.Line,
			k.ConsoleCommand(), knownhosts.Normalize(k.Addr), file)
	}
	return false, fmt.Errorf("check %s against %s: %w", k.Addr, file, err)
}

// Pin appends the key's line to file, creating the file (mode 0600) if
// need be, unless file pins it already; added says whether it wrote. It
// never replaces or adds beside another key for the host: that is an
// error wrapping ErrHostKeyChanged.
func (k HostKey) Pin(file string) (added bool, err error) {
	pinned, err := k.Pinned(file)
	if err != nil || pinned {
		return false, err
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return false, fmt.Errorf("pin host key: %w", err)
	}
	// For the error paths: the written file's Close is checked below.
	defer func() { _ = f.Close() }()
	line := []byte(k.Line() + "\n")
	if st, err := f.Stat(); err != nil {
		return false, fmt.Errorf("pin host key: %w", err)
	} else if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			return false, fmt.Errorf("pin host key: read %s: %w", file, err)
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		return false, fmt.Errorf("pin host key: write %s: %w", file, err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("pin host key: sync %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("pin host key: close %s: %w", file, err)
	}
	return true, nil
}
