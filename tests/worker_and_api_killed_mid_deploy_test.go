package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
)

// TestWorkerKilledMidDeploy kills the worker with SIGKILL while the node
// waits for its agent and again while the agent writes the image: the deploy
// finishes when a worker comes back, without a second power-on or write.
func TestWorkerKilledMidDeploy(t *testing.T) {
	img := newImageServer(t, 16<<20)
	img.delay = 300 * time.Millisecond // about 5 s of writing
	uuid := enrollAgentNode(t, "crash-node-0", "52:54:00:bb:00:02", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, verb := range []string{"manage", "provide"} {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}, nil); code != 202 {
			t.Fatalf("%s: %d", verb, code)
		}
		waitState(t, uuid, map[string]string{"manage": "manageable", "provide": "available"}[verb], 60*time.Second)
	}
	// No agent yet: the node will wait for its call-back.
	if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	lab.KillWorker()
	time.Sleep(time.Second)
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	m := startSimMachine(t, uuid, []string{"52:54:00:bb:00:02"}, sim.Config{})
	// Wait until the image is being written, then crash again.
	deadline := time.Now().Add(90 * time.Second)
	for img.downloads.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if img.downloads.Load() == 0 {
		t.Fatalf("write_image never started; node %+v\n%s", getNode(t, uuid), workerLog())
	}
	lab.KillWorker()
	time.Sleep(2 * time.Second)
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "active", 180*time.Second)
	if got := img.downloads.Load(); got != 1 {
		t.Errorf("image written %d times across the crashes, want 1", got)
	}
	if m.boots() != 1 {
		t.Errorf("the machine booted the agent %d times, want 1", m.boots())
	}
	c := temporalClient(t)
	_, powerOns := historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
		return et == enumspb.EVENT_TYPE_MARKER_RECORDED && strings.Contains(s, `SetPower`) && strings.Contains(s, "rebooting")
	})
	_, scheduled := historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
		return et == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED && strings.Contains(s, "SetPower") && strings.Contains(s, "rebooting")
	})
	if powerOns+scheduled > 1 {
		t.Errorf("the agent boot's power action ran %d times", powerOns+scheduled)
	}
}

// TestAPIKilledMidDeploy kills the API with SIGKILL while the node waits for
// its agent: the agent's lookups fail until the API is back, then the deploy
// goes on. The API holds no state of its own.
func TestAPIKilledMidDeploy(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "api-crash-node-0", "52:54:00:bb:00:04", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "wait call-back"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 60*time.Second)
	}
	lab.KillAPI()
	// The machine boots its agent while the API is down.
	a, err := sim.Start(context.Background(), sim.Config{APIURL: lab.APIURL, MACs: []string{"52:54:00:bb:00:04"}, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a.PoweredOn() {
			a.Stop()
		}
	})
	time.Sleep(3 * time.Second)
	if err := lab.StartAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "active", 120*time.Second)
	if got := img.downloads.Load(); got != 1 {
		t.Errorf("image written %d times, want 1", got)
	}
}
