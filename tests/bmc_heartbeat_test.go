package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflow/v1"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestBMCCallOfADeadWorkerIsHandedOnAtItsHeartbeatTimeout: a power action
// with a 300 s timeout on a BMC that accepts TCP and never answers holds
// its activity for minutes (its start-to-close is 11 minutes). While its
// worker lives the attempt reports to Temporal; when the worker is killed,
// the attempt fails at its heartbeat timeout (the policy's 30 s) and the
// next starts on the worker that replaces it, not 11 minutes later.
func TestBMCCallOfADeadWorkerIsHandedOnAtItsHeartbeatTimeout(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	hang := startDeadBMC(t, false)
	name := "bmc-hangs-worker-dies"
	n := &store.Node{Name: &name, Driver: "redfish", ProvisionState: "available", PowerState: psPtr("power off"),
		DriverInfo: map[string]any{"redfish_address": hang.url(), "redfish_username": "admin", "redfish_password": "password",
			"redfish_system_id": "/redfish/v1/Systems/1", "redfish_timeout": "10m", "redfish_connection_attempts": 1}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hang.close() // the calls end; then the node may go
		waitFor(t, "the power action to end", 3*time.Minute, func() bool {
			nd, err := st.GetNode(ctx, n.UUID)
			return err == nil && nd.TargetPowerState == nil
		})
		_, _ = call2(t, "DELETE", "/v1/nodes/"+n.UUID, nil)
	})
	if code, _ := callAt(t, lab.APIURL, "1.27", "PUT", "/v1/nodes/"+n.UUID+"/states/power", map[string]any{"target": "power on", "timeout": 300}, nil); code != 202 {
		t.Fatalf("power on: HTTP %d", code)
	}
	c := temporalClient(t)
	pending := func() *workflow.PendingActivityInfo {
		d, err := c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(n.UUID), "")
		if err != nil {
			return nil
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == workflows.ActSetPower {
				return a
			}
		}
		return nil
	}
	// The attempt runs and reports while its worker lives.
	waitFor(t, "the power call to run and report a heartbeat", time.Minute, func() bool {
		a := pending()
		return a != nil && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && a.GetLastHeartbeatTime() != nil
	})
	first := pending()
	if first.GetAttempt() != 1 {
		t.Fatalf("the power call is at attempt %d before the worker dies", first.GetAttempt())
	}
	lab.KillWorker()
	killed := time.Now()
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	// The next attempt starts once the heartbeat timeout has passed; the
	// bound is a third of the call's start-to-close timeout.
	waitFor(t, "the power call's next attempt", 4*time.Minute, func() bool {
		a := pending()
		return a != nil && a.GetAttempt() >= 2
	})
	next := pending()
	fail := next.GetLastFailure()
	if tf := fail.GetTimeoutFailureInfo(); tf == nil || tf.GetTimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
		t.Errorf("the dead worker's attempt failed with %q, want a heartbeat timeout", fail.GetMessage())
	}
	t.Logf("the worker killed; attempt %d of the power call after %s (%s)", next.GetAttempt(), time.Since(killed).Round(time.Second), strings.TrimSpace(fail.GetMessage()))
}
