package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// TestChangeBootModeRecordsWhatTheBMCReadsBack: the BMC's read-back goes
// into the node; a refusal becomes the node's last_error, the workflow
// itself ends without failing (the API answered 202 long before).
func TestChangeBootModeRecordsWhatTheBMCReadsBack(t *testing.T) {
	on := true
	for _, c := range []struct {
		name    string
		req     BootModeRequest
		fail    error
		wantRec BootModeRecord
	}{
		{"boot mode", BootModeRequest{NodeUUID: "n1", BootMode: "uefi"}, nil,
			BootModeRecord{NodeUUID: "n1", BootMode: "uefi", Event: "Set boot mode uefi"}},
		{"secure boot", BootModeRequest{NodeUUID: "n1", SecureBoot: &on}, nil,
			BootModeRecord{NodeUUID: "n1", SecureBoot: &on, Event: "Set secure boot state true"}},
		{"refused", BootModeRequest{NodeUUID: "n1", SecureBoot: &on},
			temporal.NewNonRetryableApplicationError("Driver ipmi does not support set_secure_boot_state (disabled or not implemented).", ErrTypeBMCUnsupported, nil),
			BootModeRecord{NodeUUID: "n1", Severity: "ERROR",
				LastError: "Failed to set secure boot state true for node n1: Driver ipmi does not support set_secure_boot_state (disabled or not implemented)."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(ChangeBootMode)
			reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
			reg(func(ctx context.Context, uuid string) (NodeInfo, error) {
				return NodeInfo{UUID: uuid, Driver: "redfish", Policy: Policy{BMCAttempts: 1, BMCCallTimeout: time.Minute}}, nil
			}, ActLoadNode)
			reg(func(ctx context.Context, in BootModeInput) (BootModeResult, error) {
				if c.fail != nil {
					return BootModeResult{}, c.fail
				}
				return BootModeResult{BootMode: in.BootMode, SecureBoot: in.SecureBoot}, nil
			}, ActSetBootMode)
			var got BootModeRecord
			reg(func(ctx context.Context, in BootModeRecord) error { got = in; return nil }, ActRecordBootMode)
			env.ExecuteWorkflow(ChangeBootMode, c.req)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if c.wantRec.LastError != "" {
				c.wantRec.Event = c.wantRec.LastError
			}
			if got.BootMode != c.wantRec.BootMode || (got.SecureBoot == nil) != (c.wantRec.SecureBoot == nil) ||
				!strings.HasPrefix(got.LastError, c.wantRec.LastError) || got.Event != c.wantRec.Event || got.Severity != c.wantRec.Severity {
				t.Errorf("recorded %+v, want %+v", got, c.wantRec)
			}
		})
	}
}
