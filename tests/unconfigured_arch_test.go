package tests

import (
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/workflows"
)

// TestDeployOfAnArchitectureWithoutAgentFailsBeforePowerOn: the lab's
// worker boots x86_64 only (--agent-architectures' default); a node whose
// cpu_arch is aarch64 goes to deploy failed with a last_error naming the
// architecture and the setting, and its deploy never called the BMC's
// power (no SetPower in its history), nor did an agent boot.
func TestDeployOfAnArchitectureWithoutAgentFailsBeforePowerOn(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:bb:00:a6"
	uuid := enrollAgentNode(t, "arm64-unconfigured-0", mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "add", "path": "/properties/cpu_arch", "value": "aarch64"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "deploy failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	n := getNode(t, uuid)
	msg := deref(n.LastError)
	for _, want := range []string{"cpu_arch aarch64", "--agent-architectures", "boots x86_64"} {
		if !strings.Contains(msg, want) {
			t.Errorf("last_error %q does not say %q", msg, want)
		}
	}
	if m.boots() != 0 {
		t.Errorf("an agent booted %d times for a node whose architecture has no agent", m.boots())
	}
	// SetPower is a local activity for fake-hardware (a marker naming its
	// type) and a regular one for real BMCs: neither may appear.
	_, powered := historyCount(t, temporalClient(t), uuid, func(et enumspb.EventType, text string) bool {
		return strings.Contains(text, `\"ActivityType\":\"`+workflows.ActSetPower+`\"`) ||
			strings.Contains(text, `activity_type:{name:"`+workflows.ActSetPower+`"}`)
	})
	if powered != 0 {
		t.Errorf("the deploy called %s %d times before it failed, want none: the machine was powered", workflows.ActSetPower, powered)
	}
	// The same reading sees the boot preparation that failed (a local
	// activity's marker): the zero above is not a history the match
	// cannot read.
	if _, prep := historyCount(t, temporalClient(t), uuid, func(et enumspb.EventType, text string) bool {
		return et == enumspb.EVENT_TYPE_MARKER_RECORDED && strings.Contains(text, workflows.ActPrepareBoot)
	}); prep == 0 {
		t.Errorf("no %s in the deploy's history: the match reads nothing", workflows.ActPrepareBoot)
	}
	t.Logf("last_error: %s", msg)
}
