package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/payload"
)

// upgradeChangeID is the change ID of the deliberate change the new worker
// of TestUpgradeInTheMiddleOfADeploy carries (docs/versioning.md).
const upgradeChangeID = "upgrade-test-pause-before-plan"

// upgradePause is the gated timer's duration: a value no other timer of a
// deploy has, so that the history shows which path a deploy took.
const upgradePause = 1357 * time.Millisecond

// TestUpgradeInTheMiddleOfADeploy upgrades ironflow's worker while deploys
// are in flight, as docs/versioning.md's rollout procedure does: "old" is
// the worker the lab runs (this tree), "new" is a copy of this tree with a
// change to the deploy's sequence — a timer before the deploy plan —
// behind a workflow.GetVersion gate with its change ID in
// workflows/versions.go, built by the test. Three deploys are started on
// the old worker and left waiting in wait call-back (no agent yet),
// mid-write_image (the simulated agent writing a slow image), and for an
// operator after write_image failed (the image URL answers 404). The old
// worker is killed with SIGKILL, the new one started: each deploy finishes
// active (the operator's after retry), the write is not repeated, and none
// of them takes the new path; a deploy started after the upgrade takes it
// (its history holds the gated timer and the change ID's marker).
func TestUpgradeInTheMiddleOfADeploy(t *testing.T) {
	start := time.Now()
	newBin := make(chan string, 1)
	buildErr := make(chan error, 1)
	buildDir := t.TempDir()
	go func() {
		bin, err := buildPatchedWorker(buildDir)
		if err != nil {
			buildErr <- err
			return
		}
		newBin <- bin
	}()

	// The slow image of the deploy caught mid-write: 24 MiB at 0.5 s per
	// MiB, about 12 s of writing.
	slow := newImageServer(t, 24<<20)
	slow.delay = 500 * time.Millisecond
	img := newImageServer(t, 1<<20)
	type upgradeCase struct {
		name, mac, uuid string
		img             *imageServer
		machine         *simMachine
		outcome         string
		took            time.Duration
	}
	cases := []*upgradeCase{
		{name: "wait call-back", mac: "52:54:00:9a:17:01", img: img},
		{name: "mid write_image", mac: "52:54:00:9a:17:02", img: slow},
		{name: "failed step waits for the operator", mac: "52:54:00:9a:17:03", img: img},
		{name: "started after the upgrade", mac: "52:54:00:9a:17:04", img: img},
	}
	waitCB, midWrite, failed, after := cases[0], cases[1], cases[2], cases[3]
	for i, c := range cases {
		c.uuid = enrollAgentNode(t, fmt.Sprintf("upgrade-node-%d", i), c.mac, c.img)
		patchNode(t, c.uuid, map[string]any{"op": "add", "path": "/automated_clean", "value": false})
	}
	patchNode(t, failed.uuid, map[string]any{"op": "replace", "path": "/instance_info/image_source", "value": img.URL + "/missing-because-404"})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		for _, c := range cases {
			if _, err := call2(t, "PUT", "/v1/nodes/"+c.uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range cases {
			waitState(t, c.uuid, s.state, 60*time.Second)
		}
	}

	// On the old worker: one deploy waits for its agent (none boots yet),
	// one fails write_image and waits for an operator.
	deploy := func(c *upgradeCase) {
		t.Helper()
		if _, err := call2(t, "PUT", "/v1/nodes/"+c.uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
			t.Fatal(err)
		}
	}
	deploy(waitCB)
	failed.machine = startSimMachine(t, failed.uuid, []string{failed.mac}, sim.Config{})
	deploy(failed)
	waitState(t, waitCB.uuid, "wait call-back", 60*time.Second)
	if n := waitState(t, failed.uuid, "deploy failed", 90*time.Second); !strings.Contains(deref(n.LastError), "write_image") {
		t.Fatalf("the failed deploy's last_error should name write_image: %q", deref(n.LastError))
	}

	// The new worker must be built before the write starts: it is started
	// while the image is written.
	var bin string
	select {
	case bin = <-newBin:
	case err := <-buildErr:
		t.Fatal(err)
	case <-time.After(10 * time.Minute):
		t.Fatal("building the new worker took more than 10 minutes")
	}
	midWrite.machine = startSimMachine(t, midWrite.uuid, []string{midWrite.mac}, sim.Config{})
	deploy(midWrite)
	deadline := time.Now().Add(90 * time.Second)
	for slow.downloads.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if slow.downloads.Load() == 0 {
		t.Fatalf("write_image never started; node %+v\n%s", getNode(t, midWrite.uuid), workerLog())
	}

	// The upgrade: kill -9 the old worker, start the new one. The lab's
	// own worker comes back once the test is done.
	oldBin := lab.Bin
	lab.KillWorker()
	if n := getNode(t, midWrite.uuid); n.ProvisionState != "deploying" {
		t.Fatalf("the image write should still run when the old worker dies; the node is %q", n.ProvisionState)
	}
	upgraded := time.Now()
	lab.Bin = bin
	t.Cleanup(func() {
		lab.KillWorker()
		lab.Bin = oldBin
		if err := lab.StartWorker(); err != nil {
			t.Errorf("restart the lab's worker: %v", err)
		}
	})
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}

	// The machine waiting for its call-back boots its agent now; the
	// operator fixes the failed deploy's image and sends retry.
	waitCB.machine = startSimMachine(t, waitCB.uuid, []string{waitCB.mac}, sim.Config{})
	patchNode(t, failed.uuid, map[string]any{"op": "replace", "path": "/instance_info/image_source", "value": img.URL + "/disk.raw"})
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(), "--workflow-id", "node-"+failed.uuid, "--name", "retry").CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal retry: %v\n%s", err, out)
	}
	retried := time.Now()
	pending := []*upgradeCase{waitCB, midWrite, failed}
	for deadline := time.Now().Add(240 * time.Second); len(pending) > 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not active 240 s after the upgrade: %d deploys, the first %s (%+v)\n%s", len(pending), pending[0].name, getNode(t, pending[0].uuid), workerLog())
		}
		left := pending[:0]
		for _, c := range pending {
			n := getNode(t, c.uuid)
			switch {
			case n.ProvisionState == "active":
				c.took, c.outcome = time.Since(upgraded), "active"
				if n.LastError != nil {
					t.Errorf("%s: last_error kept: %q", c.name, *n.LastError)
				}
				continue
			case strings.HasSuffix(n.ProvisionState, "failed") && (c != failed || time.Since(retried) > 60*time.Second):
				t.Fatalf("%s: the node went to %q after the upgrade: last_error %q\n%s", c.name, n.ProvisionState, deref(n.LastError), workerLog())
			}
			left = append(left, c)
		}
		pending = left
	}
	failed.outcome = "active after retry"
	if got := slow.downloads.Load(); got != 1 {
		t.Errorf("the image caught mid-write was downloaded %d times across the upgrade, want 1", got)
	}
	midWrite.outcome += fmt.Sprintf(", image downloaded %d time(s)", slow.downloads.Load())
	if b := waitCB.machine.boots(); b != 1 {
		t.Errorf("the machine that waited for its call-back booted its agent %d times, want 1", b)
	}

	// A deploy started after the upgrade.
	after.machine = startSimMachine(t, after.uuid, []string{after.mac}, sim.Config{})
	began := time.Now()
	deploy(after)
	waitState(t, after.uuid, "active", 120*time.Second)
	after.took, after.outcome = time.Since(began), "active"

	// Which path each took, from its history through the temporal CLI.
	for _, c := range cases {
		timer, marker, checked := gatedPath(t, cli, c.uuid)
		newPath := c == after
		if timer != newPath || (checked && marker != newPath) {
			t.Errorf("%s: gated timer in history %v, change ID %q in a version marker %v; want both %v", c.name, timer, upgradeChangeID, marker, newPath)
		}
		if newPath {
			c.outcome += ", new path (gated timer and marker in its history)"
		} else {
			c.outcome += ", old path (no gated timer or marker)"
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| deploy (where it was when the old worker was killed) | outcome on the new worker | active |\n|---|---|---|\n")
	for _, c := range cases {
		when := "after the upgrade"
		if c == after {
			when = "after its start"
		}
		fmt.Fprintf(&table, "| %s | %s | %s %s |\n", c.name, c.outcome, c.took.Round(100*time.Millisecond), when)
	}
	t.Logf("upgrade in the middle of a deploy (whole test %s):\n%s", time.Since(start).Round(time.Second), table.String())
}

func patchNode(t *testing.T, uuid string, ops ...map[string]any) {
	t.Helper()
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, ops, nil); code != 200 {
		t.Fatalf("patch node %s %v: %d", uuid, ops, code)
	}
}

// gatedPath reads the node's deploy history with `temporal workflow show`
// and says whether it holds the gated timer and a version marker of
// upgradeChangeID; checked is false when the marker's payload is encoded
// (a payload codec) and could not be read.
func gatedPath(t *testing.T, cli, uuid string) (timer, marker, checked bool) {
	t.Helper()
	out, err := exec.Command(cli, "workflow", "show", "--address", lab.Temporal.Address(), "-w", "node-"+uuid, "--output", "json", "--no-json-shorthand-payloads").Output()
	if err != nil {
		t.Fatalf("temporal workflow show: %v", err)
	}
	// The stack's payloads are encrypted: open them with its key.
	if out, err = payload.DecodeHistoryJSON(context.Background(), labCodec(t), out); err != nil {
		t.Fatalf("open the history of node %s: %v", uuid, err)
	}
	var h struct {
		Events []struct {
			Timer *struct {
				StartToFireTimeout string `json:"startToFireTimeout"`
			} `json:"timerStartedEventAttributes"`
			Marker *struct {
				MarkerName string `json:"markerName"`
				Details    map[string]struct {
					Payloads []struct {
						Metadata map[string]string `json:"metadata"`
						Data     string            `json:"data"`
					} `json:"payloads"`
				} `json:"details"`
			} `json:"markerRecordedEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("decode the history of node %s: %v", uuid, err)
	}
	want := fmt.Sprintf("%gs", upgradePause.Seconds())
	checked = true
	for _, e := range h.Events {
		if e.Timer != nil && e.Timer.StartToFireTimeout == want {
			timer = true
		}
		if e.Marker == nil || e.Marker.MarkerName != "Version" {
			continue
		}
		for _, p := range e.Marker.Details["change-id"].Payloads {
			enc, _ := base64.StdEncoding.DecodeString(p.Metadata["encoding"])
			if string(enc) != "json/plain" {
				checked = false
				continue
			}
			data, _ := base64.StdEncoding.DecodeString(p.Data)
			var id string
			if json.Unmarshal(data, &id) == nil && id == upgradeChangeID {
				marker = true
			}
		}
	}
	return timer, marker, checked
}

// buildPatchedWorker copies this module into dir (a temporary one), puts a
// timer before the deploy plan behind a GetVersion gate (its change ID a
// constant in workflows/versions.go, as docs/versioning.md asks), and
// builds the ironflow binary there, offline, with this module's caches.
func buildPatchedWorker(dir string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m (the upgrade test builds a worker and needs the go command): %w", err)
	}
	src := strings.TrimSpace(string(root))
	err = filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if e.IsDir() {
			switch rel {
			case ".git", "bin", ".data":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy the module: %w", err)
	}
	edit := func(file, old, new string) error {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), old); n != 1 {
			return fmt.Errorf("%s: %q found %d times, want once: update the upgrade test's patch to the current code", file, old, n)
		}
		return os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
	}
	for _, e := range []struct{ file, old, new string }{
		{"workflows/versions.go", "\nconst (", fmt.Sprintf("\nconst (\n\t// changeUpgradeTestPause: a timer before the deploy plan (the upgrade test's new worker).\n\tchangeUpgradeTestPause = %q\n", upgradeChangeID)},
		{"workflows/deploy.go", "\t\"fmt\"\n", "\t\"fmt\"\n\t\"time\"\n"},
		{"workflows/deploy.go", "\tswitch hardware.DeployOf(r.node.DeployInterface).Flow() {\n", fmt.Sprintf(
			"\tif workflow.GetVersion(ctx, changeUpgradeTestPause, workflow.DefaultVersion, 1) == 1 {\n"+
				"\t\tif err := workflow.Sleep(ctx, %d*time.Millisecond); err != nil {\n\t\t\treturn r.finish(err)\n\t\t}\n\t}\n"+
				"\tswitch hardware.DeployOf(r.node.DeployInterface).Flow() {\n", upgradePause.Milliseconds())},
	} {
		if err := edit(e.file, e.old, e.new); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "bin", "ironflow-new")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/ironflow")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the new worker: %w\n%s", err, out)
	}
	return bin, nil
}
