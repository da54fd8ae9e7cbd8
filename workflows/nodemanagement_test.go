package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// TestNodeManagementCallsTheBMC: each action runs its one hardware
// activity with the request's indicator and state, a read returns the
// BMC's indicators, and a refused indicator fails at once (no retry) with
// the activity's message.
func TestNodeManagementCallsTheBMC(t *testing.T) {
	for _, c := range []struct {
		name    string
		req     ManagementRequest
		want    string
		refused bool
	}{
		{"nmi", ManagementRequest{NodeUUID: "n1", Action: ManagementInjectNMI}, ActInjectNMI, false},
		{"read", ManagementRequest{NodeUUID: "n1", Action: ManagementReadIndicators}, ActReadIndicators, false},
		{"set", ManagementRequest{NodeUUID: "n1", Action: ManagementSetIndicator, Component: "system", Indicator: "u1", State: "blinking"}, ActSetIndicator + " u1@system blinking", false},
		{"set unknown", ManagementRequest{NodeUUID: "n1", Action: ManagementSetIndicator, Component: "disk", Indicator: "x", State: "on"}, ActSetIndicator + " x@disk on", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(NodeManagement)
			var calls []string
			reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
			reg(func(ctx context.Context, uuid string) (NodeInfo, error) {
				return NodeInfo{UUID: uuid, Driver: "redfish", Policy: Policy{BMCAttempts: 3, BMCCallTimeout: time.Minute}}, nil
			}, ActLoadNode)
			reg(func(ctx context.Context, in IndicatorInput) error {
				calls = append(calls, ActInjectNMI)
				return nil
			}, ActInjectNMI)
			reg(func(ctx context.Context, in IndicatorInput) ([]Indicator, error) {
				calls = append(calls, ActReadIndicators)
				return []Indicator{{Component: "system", Name: "u1", States: []string{"off", "on"}, State: "on"}}, nil
			}, ActReadIndicators)
			reg(func(ctx context.Context, in IndicatorInput) error {
				calls = append(calls, ActSetIndicator+" "+in.Indicator+"@"+in.Component+" "+in.State)
				if in.Component == "disk" {
					return temporal.NewNonRetryableApplicationError("Unknown indicator x for component disk of node n1", ErrTypeInvalidParameter, nil)
				}
				return nil
			}, ActSetIndicator)
			env.ExecuteWorkflow(NodeManagement, c.req)
			err := env.GetWorkflowError()
			if c.refused {
				var app *temporal.ApplicationError
				if err == nil || !errors.As(err, &app) || app.Type() != ErrTypeInvalidParameter || app.Message() != "Unknown indicator x for component disk of node n1" {
					t.Fatalf("refused set: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0] != c.want {
				t.Errorf("calls %q, want [%q]", calls, c.want)
			}
			if c.name == "read" {
				var out []Indicator
				if err := env.GetWorkflowResult(&out); err != nil || len(out) != 1 || out[0].Name != "u1" || out[0].State != "on" {
					t.Errorf("read result %+v, %v", out, err)
				}
			}
		})
	}
}
