package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// TestSoftPowerOffIgnoredFailsAsIronic: a soft power off (or soft reboot)
// whose machine is still on at the API's timeout ends the power workflow
// with Ironic's node_power_action last_error, the power state the BMC read
// (still on, so the client can fall back to a hard power off), the target
// cleared by the record; the activity may take the timeout twice over.
func TestSoftPowerOffIgnoredFailsAsIronic(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"soft power off", "Failed to change power state to 'power off' by 'soft power off': Failed to set node power state to power off."},
		{"soft rebooting", "Failed to change power state to 'power on' by 'soft rebooting': Failed to set node power state to power off."},
	} {
		t.Run(tc.target, func(t *testing.T) {
			f := newFakeCloud()
			f.node.PowerState = "power off" // stale: the BMC says on
			env := newEnv(t, f)
			var gotTimeout time.Duration
			env.OnActivity(ActSetPower, mockAny, mockAny).Return(func(ctx context.Context, in PowerInput) (string, error) {
				info := activity.GetInfo(ctx)
				gotTimeout = info.Deadline.Sub(info.StartedTime)
				if in.TimeoutSeconds != 200 {
					t.Errorf("activity timeout %d, want the API's 200", in.TimeoutSeconds)
				}
				return "", temporal.NewNonRetryableApplicationError("Failed to set node power state to power off.", ErrTypePowerStateFailure, nil, "power on")
			})
			env.ExecuteWorkflow(SetPowerState, PowerRequest{NodeUUID: f.node.UUID, Target: tc.target, TimeoutSeconds: 200})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if gotTimeout < 400*time.Second {
				t.Errorf("the activity may run %s, less than the API's timeout twice over", gotTimeout)
			}
			if len(f.powerRecs) != 1 {
				t.Fatalf("power records %+v, want one", f.powerRecs)
			}
			rec := f.powerRecs[0]
			if rec.LastError != tc.want || rec.PowerState != "power on" || rec.Severity != "ERROR" {
				t.Fatalf("record %+v, want last_error %q and power on", rec, tc.want)
			}
			if n := strings.Count(strings.Join(f.callList(), ","), "SetPower"); n != 0 {
				t.Fatalf("the fake's SetPower ran %d times: the mock should have answered", n)
			}
		})
	}
}
