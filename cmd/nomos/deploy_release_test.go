package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomoshq/nomos/internal/testenv"
)

// The files each package puts on a machine, directories left out.
var releasePackageFiles = map[string][]string{
	"nomos": {
		"/etc/nomos/actuator.yaml",
		"/etc/nomos/bot.yaml",
		"/usr/bin/nomos",
		"/usr/lib/systemd/system/nomos-actuator.service",
		"/usr/lib/systemd/system/nomos-bot.service",
		"/usr/lib/sysusers.d/nomos.conf",
		"/usr/lib/tmpfiles.d/nomos.conf",
		"/usr/share/doc/nomos/copyright",
		"/usr/share/doc/nomos/nomos.example.yaml",
		"/usr/share/nomos/redis/acl.sh",
		"/usr/share/nomos/redis/users.acl",
		"/usr/share/nomos/restore.sh",
	},
	"nomos-gate": {
		"/usr/bin/nomos",
		"/usr/share/doc/nomos-gate/copyright",
	},
}

// TestReleasePackages runs `make release` for this machine's architecture
// and installs what it built as an operator would, into a scratch root:
// dpkg --root, with the maintainer scripts run outside a chroot
// (DPKG_ROOT set, as dpkg(1) --force-script-chrootless documents). It
// checks SHA256SUMS, each package's file list, the users and credential
// directories the postinst makes, the installed units with
// systemd-analyze, that the installed binary runs and is the production
// build stamped with the version, the gate's postinst line, and that
// purging leaves none of the packages' files behind.
func TestReleasePackages(t *testing.T) {
	testenv.SkipIfShort(t, "it builds the release and installs its packages")
	for _, tool := range []string{"make", "dpkg", "dpkg-deb", "systemd-analyze", "systemd-sysusers", "systemd-tmpfiles"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run `make prepare`", tool)
		}
	}
	const version = "0.0.1"
	arch := runtime.GOARCH
	dist := t.TempDir()
	out, err := exec.Command("make", "-C", "../..", "release", "VERSION="+version, "RELEASE_ARCHES="+arch, "DIST="+dist).CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}

	// SHA256SUMS names every artifact, and each one matches.
	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var artifacts []string
	for _, e := range entries {
		if e.Name() != "SHA256SUMS" {
			artifacts = append(artifacts, e.Name())
		}
	}
	wantArtifacts := []string{
		"nomos-gate_" + version + "_" + arch + ".deb",
		"nomos_" + version + "_" + arch + ".deb",
		"nomos_" + version + "_linux_" + arch,
		"nomos_" + version + "_linux_" + arch + ".cdx.json",
	}
	if diff := cmp.Diff(wantArtifacts, artifacts); diff != "" {
		t.Errorf("dist/ (-want +got):\n%s", diff)
	}
	var summed []string
	for name, want := range sums {
		summed = append(summed, name)
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatalf("SHA256SUMS names %s: %v", name, err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
	}
	slices.Sort(summed)
	if diff := cmp.Diff(wantArtifacts, summed); diff != "" {
		t.Errorf("SHA256SUMS covers (-want +got):\n%s", diff)
	}

	// The SBOM describes the nomos module at this version and lists what it
	// was linked from.
	var sbom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name string } `json:"components"`
	}
	raw, err := os.ReadFile(filepath.Join(dist, wantArtifacts[3]))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &sbom); err != nil {
		t.Fatalf("SBOM: %v", err)
	}
	if sbom.BOMFormat != "CycloneDX" || sbom.Metadata.Component.Name != module || sbom.Metadata.Component.Version != "v"+version {
		t.Errorf("SBOM describes %s %q %q, want CycloneDX for %s v%s", sbom.BOMFormat, sbom.Metadata.Component.Name, sbom.Metadata.Component.Version, module, version)
	}
	if !slices.ContainsFunc(sbom.Components, func(c struct{ Name string }) bool { return c.Name == "maunium.net/go/mautrix" }) {
		t.Error("SBOM does not list maunium.net/go/mautrix, which nomos links")
	}

	root := t.TempDir()
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(root, "var/lib/dpkg", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg := func(args ...string) string {
		t.Helper()
		args = append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless", "--log=" + filepath.Join(root, "dpkg.log")}, args...)
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	deb := func(pkg string) string { return filepath.Join(dist, pkg+"_"+version+"_"+arch+".deb") }

	// nomos.
	dpkg("--install", deb("nomos"))
	checkInstalledFiles(t, root, dpkg, "nomos")
	checkVersion(t, root, version)
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatalf("the postinst made no users: %v", err)
	}
	for _, user := range []string{"nomos-bot:", "nomos-actuator:"} {
		if !bytes.Contains(passwd, []byte("\n"+user)) && !bytes.HasPrefix(passwd, []byte(user)) {
			t.Errorf("the postinst did not make the user %s\n%s", user, passwd)
		}
	}
	for _, d := range []string{"etc/nomos/bot", "etc/nomos/actuator"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("/%s: %v, want a directory of mode 0700 for the role's secrets", d, err)
		}
	}
	verifyInstalledUnits(t, root)

	// Installing nomos-gate over nomos replaces it (they ship the same
	// binary), and its postinst prints the line for authorized_keys.
	out2 := dpkg("--install", deb("nomos-gate"))
	if !strings.Contains(out2, `restrict,from="NOMOS-ADDRESS",command="/usr/bin/nomos gate" ssh-ed25519`) ||
		!strings.Contains(out2, "nomos gate -install -key-file ssh_key.pub") {
		t.Errorf("the nomos-gate postinst does not print the authorized_keys line and the -install command:\n%s", out2)
	}
	// What is left of nomos is its conffiles, which purge removes.
	if status := dpkg("--status", "nomos"); !strings.Contains(status, " ok config-files\n") {
		t.Errorf("nomos is still installed beside nomos-gate:\n%s", status)
	}
	checkInstalledFiles(t, root, dpkg, "nomos-gate")
	checkVersion(t, root, version)
	help, _ := exec.Command(filepath.Join(root, "usr/bin/nomos"), "gate", "-help").CombinedOutput()
	if !strings.Contains(string(help), "-install") {
		t.Errorf("nomos gate -help does not document -install:\n%s", help)
	}

	// Purging both leaves none of their files; the users stay, as Debian
	// keeps a package's system users.
	dpkg("--purge", "nomos-gate", "nomos")
	for _, files := range releasePackageFiles {
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
				t.Errorf("%s is still there after purge", f)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/nomos")); err == nil {
		t.Error("/etc/nomos is still there after purge, though it held no secret")
	}
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS: bad line %q", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

// checkInstalledFiles holds pkg's dpkg file list to releasePackageFiles,
// and each file to being on disk.
func checkInstalledFiles(t *testing.T, root string, dpkg func(...string) string, pkg string) {
	t.Helper()
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(dpkg("--listfiles", pkg)), "\n") {
		fi, err := os.Lstat(filepath.Join(root, line))
		if err != nil {
			t.Errorf("%s lists %s, which is not installed: %v", pkg, line, err)
			continue
		}
		if !fi.IsDir() {
			files = append(files, line)
		}
	}
	slices.Sort(files)
	if diff := cmp.Diff(releasePackageFiles[pkg], files); diff != "" {
		t.Errorf("%s installs (-want +got):\n%s", pkg, diff)
	}
}

func checkVersion(t *testing.T, root, version string) {
	t.Helper()
	bin := filepath.Join(root, "usr/bin/nomos")
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "nomos "+version+" (commit ") {
		t.Errorf("installed nomos version: %v: %q, want nomos %s with its commit", err, out, version)
	}
	// The production build: no dev stack.
	out, _ = exec.Command(bin, "dev").CombinedOutput()
	if !strings.Contains(string(out), "this is the production build") {
		t.Errorf("the packaged binary is not the production build: nomos dev said %q", out)
	}
}

// verifyInstalledUnits runs systemd-analyze verify on the units as
// installed. verify resolves ExecStart= on this machine, so the packaged
// /usr/bin/nomos is pointed into the scratch root, after checking it is
// exactly what the units run.
func verifyInstalledUnits(t *testing.T, root string) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, unit := range []string{"nomos-bot.service", "nomos-actuator.service"} {
		text, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", unit))
		if err != nil {
			t.Fatal(err)
		}
		u := parseUnitText(unit, string(text))
		for _, key := range []string{"ExecStartPre", "ExecStart"} {
			for _, v := range u.values(key) {
				if !strings.HasPrefix(v, "/usr/bin/nomos ") {
					t.Errorf("installed %s: %s=%s, want the packaged /usr/bin/nomos", unit, key, v)
				}
			}
		}
		path := filepath.Join(dir, unit)
		if err := os.WriteFile(path, bytes.ReplaceAll(text, []byte("/usr/bin/nomos "), []byte(filepath.Join(root, "usr/bin/nomos")+" ")), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify of the installed units: %v\n%s", err, out)
	}
}
