package installer

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/agent/ramdisk"
	"github.com/ironflow/ironflow/internal/testkit/ironic"
	"github.com/ironflow/ironflow/pxe"
)

// installDeps is the script `make run` and `make test` install Debian
// packages with.
const installDeps = "../../scripts/install-deps.sh"

// depsSet is a set of scripts/install-deps.sh as it lists it: probe (a
// command, or a path when it starts with /) → Debian package.
func depsSet(t *testing.T, set string) map[string]string {
	t.Helper()
	out, err := exec.Command("bash", installDeps, "--list", set).Output()
	if err != nil {
		t.Fatalf("install-deps.sh --list %s: %v", set, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		probe, pkg, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("install-deps.sh --list %s: line %q is not probe<TAB>package", set, line)
		}
		m[probe] = pkg
	}
	return m
}

// TestInstallDepsRunSetCoversTheAgentISOAndRamdisk: what make run's default
// paths take from the machine, as the code that takes it names it, is in
// the run set of scripts/install-deps.sh with the same package: the agent
// ISO's boot loaders (virtual media, a Redfish node's default boot), the
// ramdisk's bootloaders, mdadm, CA bundle and grub-mkimage, and the
// baremetal CLI of the README's first session. The test set holds the run
// set and Debian's Ironic, and the bench set the test set.
func TestInstallDepsRunSetCoversTheAgentISOAndRamdisk(t *testing.T) {
	run := depsSet(t, "run")
	want := map[string]string{"/usr/bin/baremetal": "python3-ironicclient"}
	maps.Copy(want, pxe.ISOHostPackages)
	maps.Copy(want, ramdisk.HostPackages)
	for _, probe := range slices.Sorted(maps.Keys(want)) {
		if got, ok := run[probe]; !ok {
			t.Errorf("install-deps.sh run does not probe %s (Debian's %s)", probe, want[probe])
		} else if got != want[probe] {
			t.Errorf("install-deps.sh run installs %s for %s, the code says %s", got, probe, want[probe])
		}
	}
	test, bench := depsSet(t, "test"), depsSet(t, "bench")
	// The differential tests' oracle (tests/ironic_oracle_test.go).
	if got := test[ironic.Probe]; got != ironic.Package {
		t.Errorf("install-deps.sh test installs %q for %s, want Debian's Ironic, %s", got, ironic.Probe, ironic.Package)
	}
	for _, sub := range []struct {
		name      string
		set, over map[string]string
	}{{"run ⊆ test", run, test}, {"test ⊆ bench", test, bench}} {
		for probe, pkg := range sub.set {
			if sub.over[probe] != pkg {
				t.Errorf("%s: %s (%s) is missing from the larger set", sub.name, probe, pkg)
			}
		}
	}
}

// TestInstallDepsRunSetWithFakeAptGet runs scripts/install-deps.sh run on
// a machine it sees as bare: its path probes under an empty root
// (IRONFLOW_DEPS_ROOT), its PATH holding only a fake apt-get that records
// what it is asked, and `id`. As root it asks apt-get for every package of
// the run set, the CLI and the agent ISO's loaders among them; as another
// user, or when apt-get fails or is absent, it says what to do and exits
// 1; with everything present it asks nothing and says nothing.
func TestInstallDepsRunSetWithFakeAptGet(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	sortBin, err := exec.LookPath("sort")
	if err != nil {
		t.Skip("no sort")
	}
	run := depsSet(t, "run")
	runPackages := slices.Sorted(maps.Values(run))
	runPackages = slices.Compact(runPackages)
	for _, p := range []string{"python3-ironicclient", "isolinux", "syslinux-common", "systemd-boot-efi", "grub-pc-bin"} {
		if !slices.Contains(runPackages, p) {
			t.Fatalf("the run set lacks %s: %v", p, runPackages)
		}
	}

	type machine struct {
		uid        string
		apt        bool // apt-get on PATH
		aptFails   bool
		everything bool // every probe present
	}
	for _, c := range []struct {
		name                string
		m                   machine
		wantCode            int
		wantCalls           []string // apt-get command lines
		wantOut, wantStderr string
	}{
		{"bare machine as root", machine{uid: "0", apt: true}, 0,
			[]string{"update -qq", "install -y -qq --no-install-recommends " + strings.Join(runPackages, " ")},
			"installed: " + strings.Join(runPackages, " "), ""},
		{"everything present", machine{uid: "0", apt: true, everything: true}, 0, nil, "", ""},
		{"bare machine as a user", machine{uid: "1000", apt: true}, 1, nil,
			"", "install them with: sudo apt-get install -y " + strings.Join(runPackages, " ")},
		{"apt-get fails", machine{uid: "0", apt: true, aptFails: true}, 1,
			[]string{"update -qq", "install -y -qq --no-install-recommends " + strings.Join(runPackages, " ")},
			"", "ironflow could not install these Debian packages: " + strings.Join(runPackages, " ")},
		{"no apt-get", machine{uid: "0"}, 1, nil,
			"", "ironflow needs these Debian packages (or their equivalents): " + strings.Join(runPackages, " ")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root, bin := filepath.Join(dir, "root"), filepath.Join(dir, "bin")
			calls := filepath.Join(dir, "apt-get.calls")
			for _, d := range []string{root, bin} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			script := func(name, body string) {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			script("id", "echo "+c.m.uid)
			if err := os.Symlink(sortBin, filepath.Join(bin, "sort")); err != nil {
				t.Fatal(err)
			}
			if c.m.apt {
				fail := ""
				if c.m.aptFails {
					fail = `[ "$1" = install ] && { echo "E: Unable to locate package" >&2; exit 100; }`
				}
				script("apt-get", `echo "$*" >> `+calls+"\n"+fail+"\nexit 0")
			}
			if c.m.everything {
				for probe := range run {
					if !strings.HasPrefix(probe, "/") {
						script(probe, "exit 0")
						continue
					}
					if err := os.MkdirAll(filepath.Dir(filepath.Join(root, probe)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(root, probe), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cmd := exec.Command(bash, installDeps, "run")
			cmd.Env = []string{"PATH=" + bin, "IRONFLOW_DEPS_ROOT=" + root}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.wantCode, stdout.String(), stderr.String())
			}
			var got []string
			if b, err := os.ReadFile(calls); err == nil {
				got = strings.Split(strings.TrimSpace(string(b)), "\n")
			}
			if !slices.Equal(got, c.wantCalls) {
				t.Errorf("apt-get was asked\n%q\nwant\n%q", got, c.wantCalls)
			}
			if c.wantOut == "" && c.wantStderr == "" && stdout.Len()+stderr.Len() > 0 {
				t.Errorf("says something with nothing to do:\n%s%s", stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), c.wantOut) {
				t.Errorf("stdout %q does not say %q", stdout.String(), c.wantOut)
			}
			if !strings.Contains(stderr.String(), c.wantStderr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.wantStderr)
			}
		})
	}
}
