package policy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// realShellWrappers are the wrappers that find reboot through PATH; sudo,
// doas, su, chroot and busybox would reach the real one.
var realShellWrappers = []string{"", "env ", "env FOO=1 ", "nice ", "nice -n 5 ", "timeout 5 ", "nohup ", "stdbuf -oL ", "command ", "exec ", "time ", "xargs ", "flock ./lock "}

// TestClassifierAgainstRealShells runs the dangerous forms of
// FuzzClassifyDangerous, with reboot as the payload, under bash and dash,
// with a reboot on PATH that only leaves a mark. Every script after which
// either shell left the mark must be destructive on a host: this checks the
// classifier against the shells themselves, not against its own reading.
func TestClassifierAgainstRealShells(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("no bash on PATH: %v", err)
	}
	shells := []string{bash}
	if dash, err := exec.LookPath("dash"); err == nil {
		shells = append(shells, dash)
	} else {
		t.Logf("no dash on PATH; checking bash only")
	}
	bin := t.TempDir()
	mark := filepath.Join(t.TempDir(), "ran")
	fake := "#!/bin/sh\necho ran >> \"$MARK\"\n"
	if err := os.WriteFile(filepath.Join(bin, "reboot"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}

	var scripts []string
	for _, st := range dangerStyles {
		switch st.name {
		case "ssh", "pct exec", "watch":
			continue // another machine, or forever
		}
		body, ok := st.embed("reboot")
		if !ok {
			continue
		}
		if st.simple {
			for _, w := range realShellWrappers {
				scripts = append(scripts, w+body)
			}
		} else {
			scripts = append(scripts, body)
		}
	}
	for _, p := range dangerPrefixes {
		for _, s := range dangerSuffixes {
			scripts = append(scripts, p+"reboot"+s)
		}
	}
	scripts = append(scripts,
		"echo $'a\\'\nreboot\necho '",
		"((reboot))",
		"!(reboot)",
		"x='a[$(reboot)]'; (( x ))",
		"x='$(reboot)'; echo ${x@P}",
		"[[ 1 -eq 'a[$(reboot)]' ]]",
		"read 'a[$(reboot)]' <<< 1",
		"unset 'a[$(reboot)]'",
		"declare 'a[$(reboot)]=1'",
		"let 'a[$(reboot)]=1'",
		"echo reboot | xargs sh -c",
		"echo reboot | xargs -I{} sh -c {}",
		"printf 'reboot\\n' | sh",
		"eval \"$(echo reboot)\"",
		"r=reboot; $r",
		"re\\\nboot",
		"reb''oot",
		"cat <<EOF | sh\nreboot\nEOF",
		"trap reboot EXIT",
		"alias x=reboot\nx",
		"f() { reboot; }; f",
		"case x in x) reboot;; esac",
	)

	ran := 0
	for _, script := range scripts {
		for _, sh := range shells {
			if err := os.Remove(mark); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err) // a mark left behind would read as this script's
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cmd := exec.CommandContext(ctx, sh, "-c", script)
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "MARK=" + mark, "HOME=" + cmd.Dir}
			_ = cmd.Run() // many scripts fail on purpose
			cancel()
			if _, err := os.Stat(mark); err != nil {
				continue
			}
			ran++
			if got := ClassifyCommand(script, TargetHost); got.Class != Destructive {
				t.Errorf("%s ran reboot from %q, but on a host it is %s %q", filepath.Base(sh), script, got.Class, got.Reasons)
			}
		}
	}
	// The fake reboot must have run for most of these, or the test proves
	// nothing.
	if ran < len(scripts)/2 {
		t.Fatalf("reboot ran for only %d of %d scripts and shells; the harness is broken", ran, len(scripts)*len(shells))
	}
	t.Logf("%d scripts, reboot ran %d times", len(scripts), ran)
}
