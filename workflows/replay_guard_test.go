package workflows

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAnUnversionedReorderFailsTheReplay proves that the replay test guards
// what it claims to: in a copy of this package (and the module packages it
// imports), a deliberate change is made to the direct deploy without a
// version gate, and the replay of the recorded histories, run there with
// `go test`, must fail with Temporal's non-determinism error and the advice
// of ReplayAdvice, while histories of other workflows still replay. A
// deploy in flight during such an upgrade would be stuck; the replay test
// is what catches it before a release.
func TestAnUnversionedReorderFailsTheReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED (-short): the guard test builds and runs the replay in a copy of the module with the go toolchain")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the guard test runs `go test` in a copy of the module and needs the go command on PATH: %v", err)
	}
	for _, c := range []struct{ name, old, new string }{
		// prepare_instance_boot's default priority drops below
		// tear_down_agent's: the two steps swap.
		{"reorder prepare_instance_boot after tear_down_agent",
			"{provision.Step{StepID: provision.StepPrepareInstanceBoot, Priority: 60}", "{provision.Step{StepID: provision.StepPrepareInstanceBoot, Priority: 30}"},
		// boot_instance no longer removes the agent's boot configuration.
		{"remove boot_instance's CleanBoot activity",
			"return r.hw.cleanBoot(BootAgent, r.running())", "return nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyModuleFor(t, goBin, "./", dir)
			patch(t, filepath.Join(dir, "workflows", "deploy.go"), c.old, c.new)
			replayFailsInCopy(t, goBin, dir)
		})
	}
}

// replayFailsInCopy runs the replay test in the patched copy dir and
// checks that the direct deploy's histories fail as a developer should see
// it, and only they.
func replayFailsInCopy(t *testing.T, goBin, dir string) {
	t.Helper()
	cmd := exec.Command(goBin, "test", "-count=1", "-v", "-run", "^TestHistoriesOfTheEarlierVersionReplay$", "./workflows/")
	cmd.Dir = dir
	// The copy uses this module's cache and build cache (the same user's
	// defaults) and never the network.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("go test in the patched copy took %s", time.Since(start).Round(time.Second))
	text := out.String()
	if err == nil {
		t.Fatalf("the replay passed after an unversioned change to the direct deploy: the replay test guards nothing\n%s", tail(text))
	}
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("go test in the copy did not run: %v\n%s", err, tail(text))
	}
	// Temporal's error for a replay whose commands differ from the
	// history's (the Go SDK's "nondeterministic workflow" error, TMPRL1100).
	if !strings.Contains(text, "TMPRL1100") && !strings.Contains(strings.ToLower(text), "nondeterministic") {
		t.Fatalf("the replay failed, but not with a non-determinism error\n%s", tail(text))
	}
	if !strings.Contains(text, ReplayAdvice) {
		t.Fatalf("the replay failure does not tell the developer what to do (%q)\n%s", ReplayAdvice, tail(text))
	}
	failed := regexp.MustCompile(`--- FAIL: TestHistoriesOfTheEarlierVersionReplay/deploy-direct `).FindString(text)
	passed := regexp.MustCompile(`--- PASS: TestHistoriesOfTheEarlierVersionReplay/manage-enroll `).FindString(text)
	if failed == "" || passed == "" {
		t.Fatalf("want the direct deploy's histories to fail and the others (manage-enroll) to replay; got\n%s", tail(text))
	}
	t.Logf("as expected: %s; %s", strings.TrimSpace(failed), strings.TrimSpace(passed))
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "replay ") && strings.Contains(line, "deploy-direct.json") {
			t.Logf("the developer reads: %s", strings.TrimSpace(line))
			break
		}
	}
}

// copyModuleFor copies go.mod, go.sum and the module's packages that pkg
// imports (pkg's directory whole, testdata included) into dir. Test files
// other than replay_test.go are left out: they would import more.
func copyModuleFor(t *testing.T, goBin, pkg, dir string) {
	t.Helper()
	list := exec.Command(goBin, "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", pkg)
	b, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	modRoot := realPath(strings.TrimSpace(string(root)))
	// The module's root package (the release, VERSION) names the histories
	// the replay test reads.
	for _, f := range []string{"go.mod", "go.sum", "VERSION", "version.go"} {
		copyFile(t, filepath.Join(modRoot, f), filepath.Join(dir, f))
	}
	self, _ := os.Getwd()
	self = realPath(self)
	for _, d := range strings.Fields(string(b)) {
		d = realPath(d)
		rel, err := filepath.Rel(modRoot, d)
		if err != nil {
			t.Fatal(err)
		}
		err = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				// Only pkg's own directory is copied with its subdirectories
				// (its testdata); other packages are copied alone.
				if path != d && d != self {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(path, "_test.go") && !(d == self && e.Name() == "replay_test.go") {
				return nil
			}
			r, _ := filepath.Rel(d, path)
			copyFile(t, path, filepath.Join(dir, rel, r))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// realPath is p with its symbolic links resolved, so that directories
// compare equal however they were reached.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// patch replaces old by new in file, failing when old is not there once:
// the guard must notice when the code it patches has changed.
func patch(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("%s: %q found %d times, want once: update the guard test's patch to the current code", file, old, n)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string) string {
	if len(s) > 6000 {
		return "...\n" + s[len(s)-6000:]
	}
	return s
}
