package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// macOnly is a stand-in for the worker's HMAC check (package signature has
// its own tests): a heartbeat is authentic when it carries the MAC the API
// would have computed, here a fixed string.
func macOnly(in VerifySignalInput) SignalVerdict {
	switch in.Heartbeat.MAC {
	case "":
		return SignalVerdict{Reason: "signal carries no MAC"}
	case "good-mac":
		return SignalVerdict{}
	}
	return SignalVerdict{Reason: "signal MAC does not match"}
}

const forgedURL = "http://10.0.0.66:9999"

// A deploy waiting in wait call-back that receives heartbeats without a MAC
// or with a wrong one ignores them: the callback URL is not adopted, the
// wait goes on (and its timeout is not reset), then a signed heartbeat
// proceeds with its own URL.
func TestForgedHeartbeatSignalsChangeNothing(t *testing.T) {
	f := newFakeCloud()
	f.verifySignal = macOnly
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{CallbackURL: forgedURL, AgentVersion: "1.0"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{CallbackURL: forgedURL, AgentVersion: "1.0", MAC: "bm90IGEgbWFj", Nonce: "x"})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		// Still waiting: nothing after wait call-back has run.
		calls := f.callList()
		if last := calls[len(calls)-1]; last != "RecordState wait call-back" {
			t.Errorf("after forged heartbeats the last call is %q, want the wait to go on", last)
		}
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{CallbackURL: agentURL, AgentVersion: "1.0", MAC: "good-mac"})
	}, 3*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if strings.Contains(calls, forgedURL) {
		t.Fatalf("the forged callback URL was used:\n%s", calls)
	}
	if !strings.Contains(calls, "RunAgentStep deploy.write_image @"+agentURL) {
		t.Fatalf("the signed heartbeat did not proceed with its URL:\n%s", calls)
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q, want active", last)
	}
	if len(f.verdicts) < 3 || f.verdicts[0].Reason == "" || f.verdicts[1].Reason == "" {
		t.Fatalf("verdicts %v: the first two heartbeats should have been refused", f.verdicts)
	}
}

// Forged heartbeats alone never end the wait nor reset its timer: the
// deploy fails on the callback timeout exactly when it fails without them.
func TestForgedHeartbeatsDoNotResetTheCallbackTimeout(t *testing.T) {
	timeToFail := func(forged []time.Duration) (time.Duration, *fakeCloud) {
		f := newFakeCloud()
		f.verifySignal = macOnly
		env := newEnv(t, f)
		for _, at := range forged {
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(SignalHeartbeat, Heartbeat{CallbackURL: forgedURL, AgentVersion: "1.0"})
			}, at)
		}
		start := env.Now()
		env.ExecuteWorkflow(DeployNode, deployRequest())
		f.requireTimedOut(t, provision.DeployFailed, "Timeout reached while waiting for callback", "30m0s", "CleanBoot\nSetPower power off")
		return env.Now().Sub(start), f
	}
	quiet, _ := timeToFail(nil)
	forged, f := timeToFail([]time.Duration{10 * time.Minute, 20 * time.Minute, 29 * time.Minute})
	if forged != quiet {
		t.Fatalf("with forged heartbeats the deploy failed after %s, without them after %s", forged, quiet)
	}
	if len(f.verdicts) != 3 {
		t.Fatalf("verdicts %v, want the three forged heartbeats checked", f.verdicts)
	}
	if strings.Contains(strings.Join(f.callList(), "\n"), forgedURL) {
		t.Fatal("the forged callback URL was used")
	}
}
