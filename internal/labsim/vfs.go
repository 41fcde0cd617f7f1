package labsim

import (
	"cmp"
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// The simulated file system: a flat map of path to content per node and per
// container, with directories implied by the paths in it. The shell's
// handlers here are the only way a script reaches files.

// sysError is an error worded as the C library words errno.
type sysError string

func (e sysError) Error() string { return string(e) }

const (
	errNoFile   sysError = "No such file or directory"
	errReadOnly sysError = "Read-only file system"
)

// fileError is how the shell reports a file it cannot open. The
// interpreter prints an [*os.PathError] and fails the command; the Op is
// the shell's name so the line reads as bash's does.
func (sh *shellRun) fileError(p string, err error) error {
	return &os.PathError{Op: sh.shell + ":", Path: p, Err: err}
}

// open is the shell's open handler, for redirections and $(<file).
func (sh *shellRun) open(ctx context.Context, name string, flag int, _ os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	switch name {
	case "/dev/null":
		return devNull{}, nil
	case "/dev/stdout":
		return writeOnly{hc.Stdout}, nil
	case "/dev/stderr":
		return writeOnly{hc.Stderr}, nil
	}
	p := absPath(hc.Dir, name)
	s := sh.env.sim
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		data, ok := s.readFile(sh.env, p)
		if !ok {
			return nil, sh.fileError(name, errNoFile)
		}
		return readOnly{strings.NewReader(data)}, nil
	}
	if readOnlyPath(p) {
		return nil, sh.fileError(name, errReadOnly)
	}
	// The shell creates or truncates the file when it opens it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if files := s.filesLocked(sh.env); files != nil {
		if _, ok := files[p]; !ok || flag&os.O_TRUNC != 0 {
			files[p] = ""
			s.saveLocked()
		}
	}
	return &fileSink{sim: s, env: sh.env, path: p, sh: sh}, nil
}

// fileSink is a file the shell opened for writing: what a command writes
// reaches the simulated file at once, and the state is saved when the
// shell closes it or, for exec's redirections, when the script ends.
type fileSink struct {
	sim  *Sim
	env  *shellEnv
	path string
	sh   *shellRun
}

func (k *fileSink) Read([]byte) (int, error) { return 0, io.EOF }

func (k *fileSink) Write(b []byte) (int, error) {
	s := k.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if files := s.filesLocked(k.env); files != nil {
		files[k.path] += string(b)
		k.sh.wrote.Store(true)
	}
	return len(b), nil
}

func (k *fileSink) Close() error {
	k.sh.saveWrites()
	return nil
}

// saveWrites saves the state if a redirection changed a file.
func (sh *shellRun) saveWrites() {
	if sh.wrote.Swap(false) {
		s := sh.env.sim
		s.mu.Lock()
		defer s.mu.Unlock()
		s.saveLocked()
	}
}

type devNull struct{}

func (devNull) Read([]byte) (int, error)        { return 0, io.EOF }
func (devNull) Write(b []byte) (int, error)     { return len(b), nil }
func (devNull) Close() error                    { return nil }
func (w writeOnly) Read([]byte) (int, error)    { return 0, io.EOF }
func (w writeOnly) Close() error                { return nil }
func (r readOnly) Write([]byte) (int, error)    { return 0, errReadOnly }
func (r readOnly) Close() error                 { return nil }
func (w writeOnly) Write(b []byte) (int, error) { return w.w.Write(b) }

type writeOnly struct{ w io.Writer }
type readOnly struct{ io.Reader }

// stat is the shell's stat handler, for test -e, cd and globbing.
func (sh *shellRun) stat(_ context.Context, name string, _ bool) (fs.FileInfo, error) {
	p := path.Clean(name)
	s := sh.env.sim
	if data, ok := s.readFile(sh.env, p); ok {
		return fileInfo{name: path.Base(p), size: int64(len(data))}, nil
	}
	if s.isDir(sh.env, p) {
		return fileInfo{name: path.Base(p), dir: true}, nil
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// access is the shell's access handler: root may do anything to a file
// that exists.
func (sh *shellRun) access(ctx context.Context, name string, _ interp.AccessMode) error {
	_, err := sh.stat(ctx, name, true)
	return err
}

// readDir is the shell's directory listing, for globbing.
func (sh *shellRun) readDir(_ context.Context, name string) ([]fs.DirEntry, error) {
	dir := path.Clean(name)
	s := sh.env.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := map[string]fileInfo{}
	for p, data := range s.filesLocked(sh.env) {
		rest, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
		if !ok || rest == "" {
			continue
		}
		if first, _, sub := strings.Cut(rest, "/"); sub {
			entries[first] = fileInfo{name: first, dir: true}
		} else {
			entries[first] = fileInfo{name: first, size: int64(len(data))}
		}
	}
	var out []fs.DirEntry
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		out = append(out, fs.FileInfoToDirEntry(entries[k]))
	}
	return out, nil
}

// fileInfo describes a simulated file or directory.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }
func (f fileInfo) Mode() fs.FileMode {
	if f.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// standardDirs exist on every simulated machine, whatever files it holds.
var standardDirs = []string{"/", "/bin", "/dev", "/etc", "/home", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/local", "/usr/local/bin", "/usr/sbin", "/var", "/var/lib", "/var/log"}

func (s *Sim) isDir(env *shellEnv, p string) bool {
	if slices.Contains(standardDirs, p) || env.vmid == 0 && (p == "/etc/pve" || p == "/etc/pve/lxc") {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.filesLocked(env) {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// absPath resolves p against dir, the shell's working directory.
func absPath(dir, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = cmp.Or(dir, homeDir) + "/" + p
	}
	return path.Clean(p)
}

// cleanPath resolves p as a program started in root's home would.
func cleanPath(p string) string {
	return absPath(homeDir, p)
}

func readOnlyPath(p string) bool {
	return strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/sys/")
}

// filesLocked is the file system commands in env see; nil if the container
// is gone.
func (s *Sim) filesLocked(env *shellEnv) map[string]string {
	hs := s.state.Hosts[env.host]
	if env.vmid == 0 {
		if hs.Files == nil {
			hs.Files = map[string]string{}
		}
		return hs.Files
	}
	if ct := hs.Containers[env.vmid]; ct != nil {
		return ct.Guest.Files
	}
	return nil
}

func (s *Sim) readFile(env *shellEnv, p string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readFileLocked(env, p)
}

func (s *Sim) readFileLocked(env *shellEnv, p string) (string, bool) {
	p = cleanPath(p)
	if files := s.filesLocked(env); files != nil {
		if data, ok := files[p]; ok {
			return data, true
		}
	}
	if env.vmid != 0 {
		return "", false
	}
	switch p {
	case "/etc/os-release":
		return hostOSRelease, true
	case "/etc/hostname":
		return env.host + "\n", true
	case "/etc/resolv.conf":
		return "search lan\nnameserver 1.1.1.1\n", true
	}
	if id, ok := strings.CutPrefix(p, "/etc/pve/lxc/"); ok {
		if vmid, err := strconv.Atoi(strings.TrimSuffix(id, ".conf")); err == nil && strings.HasSuffix(id, ".conf") {
			if ct := s.state.Hosts[env.host].Containers[vmid]; ct != nil {
				return pctConfig(ct), true
			}
		}
	}
	return "", false
}
