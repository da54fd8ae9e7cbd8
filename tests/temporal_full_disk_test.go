package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
)

// TestTemporalOnAFullDisk runs a Temporal server whose database is on a
// 64 MiB tmpfs, with an API and a worker of a conductor group of their own
// on it, and fills the disk while a deploy is in flight: the server's
// writes then wait (its calls hang to the caller's deadline), so a verb is
// refused with 503 and leaves its node as it was (its workflow start timed
// out and its write is undone), heartbeats are refused with 503 and sent
// again, reads are served, and once the space is back the deploy in flight
// and the refused one both end active.
func TestTemporalOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallDisk(t, "64m")
	logFile := filepath.Join(t.TempDir(), "temporal.log")
	tmp, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{
		DBFile: filepath.Join(dir, "temporal.db"), UIPort: -1, LogFile: logFile,
		SearchAttributes: embedded.WorkflowSearchAttributes(),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tmp.Kill)

	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	apiURL := "http://" + listen
	api, err := lab.Spawn("ironflow-api-temporal-full", append(lab.APIArgs(listen), "--temporal-address", tmp.Address()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Kill)
	if err := lab.WaitHTTP(ctx, apiURL+"/", api); err != nil {
		t.Fatal(err)
	}
	const group = "temporal-full"
	worker, err := lab.Spawn("ironflow-worker-temporal-full", append(lab.WorkerArgs(), "--temporal-address", tmp.Address(),
		"--conductor-groups", group, "--agent-api-url", apiURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Kill)

	img := newImageServer(t, 1<<20)
	uuids, macs := outageNodes(t, "temporal-full", 2, 0xd7, img)
	for _, uuid := range uuids {
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/conductor_group", "value": group}}, nil); code != 200 {
			t.Fatalf("move node %s to conductor group %s: HTTP %d", uuid, group, code)
		}
	}
	inFlight, refused := uuids[0], uuids[1]
	deploy := func(uuid string) int {
		code, _ := callAt(t, apiURL, "1.78", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil)
		return code
	}
	var code int
	waitFor(t, "the group's worker to be a live conductor", time.Minute, func() bool { code = deploy(inFlight); return code == 202 })
	startSimMachine(t, inFlight, []string{macs[0]}, sim.Config{APIURL: apiURL})
	waitAnyState(t, []string{inFlight}, []string{"wait call-back", "deploying"}, time.Minute)

	// Fill the disk: the Temporal server's next writes fail.
	filled := fillDisk(t, filepath.Join(dir, "filler"))
	t.Logf("the Temporal server's disk filled (%d MiB of filler)", filled>>20)
	time.Sleep(2 * time.Second)

	wantTemporaryFailure(t, apiURL, "PUT", "/v1/nodes/"+refused+"/states/provision", map[string]any{"target": "active"})
	if n := getNode(t, refused); n.ProvisionState != "available" || n.TargetProvisionState != nil {
		t.Errorf("the verb refused on a full disk changed node %s: %q target %s", refused, n.ProvisionState, deref(n.TargetProvisionState))
	}
	if code, _ := callAt(t, apiURL, "1.78", "GET", "/v1/nodes/"+inFlight, nil, nil); code != 200 {
		t.Errorf("a read while the Temporal server's disk is full: HTTP %d", code)
	}

	// Space again: the deploy in flight goes on, the refused verb is sent
	// again and carried out.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused verb to be accepted once the disk has room", 2*time.Minute, func() bool { return deploy(refused) == 202 })
	startSimMachine(t, refused, []string{macs[1]}, sim.Config{APIURL: apiURL})
	for _, uuid := range uuids {
		if n := waitState(t, uuid, "active", 3*time.Minute); n.LastError != nil && *n.LastError != "" {
			t.Errorf("node %s active with last_error %q", uuid, *n.LastError)
		}
	}
}

// fillDisk writes path until its file system is full, and returns how
// many bytes it wrote.
func fillDisk(t *testing.T, path string) int64 {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
