package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
)

// TestChangeVirtualMediaCallsTheBMC: attach inserts the request's image,
// detach ejects; both go through the hardware activities only.
func TestChangeVirtualMediaCallsTheBMC(t *testing.T) {
	for _, c := range []struct {
		name string
		req  VirtualMediaRequest
		want string
	}{
		{"attach", VirtualMediaRequest{NodeUUID: "n1", Attach: true, DeviceType: "cdrom", ImageURL: "http://i/boot.iso"}, ActAttachVirtualMedia + " cdrom http://i/boot.iso"},
		{"detach", VirtualMediaRequest{NodeUUID: "n1"}, ActDetachVirtualMedia},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(ChangeVirtualMedia)
			var calls []string
			reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
			reg(func(ctx context.Context, uuid string) (NodeInfo, error) {
				return NodeInfo{UUID: uuid, Driver: "redfish", Policy: Policy{BMCAttempts: 1, BMCCallTimeout: time.Minute}}, nil
			}, ActLoadNode)
			reg(func(ctx context.Context, in VirtualMediaInput) error {
				calls = append(calls, ActAttachVirtualMedia+" "+in.DeviceType+" "+in.ImageURL)
				return nil
			}, ActAttachVirtualMedia)
			reg(func(ctx context.Context, in VirtualMediaInput) error {
				calls = append(calls, ActDetachVirtualMedia)
				return nil
			}, ActDetachVirtualMedia)
			env.ExecuteWorkflow(ChangeVirtualMedia, c.req)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0] != c.want {
				t.Errorf("calls %q, want %q", calls, c.want)
			}
		})
	}
}
