package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/provision"
)

// timerLog records the timers a workflow under test starts and cancels.
type timerLog struct {
	started   []time.Duration
	cancelled int
}

func watchTimers(env *testsuite.TestWorkflowEnvironment) *timerLog {
	l := &timerLog{}
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { l.started = append(l.started, d) })
	env.SetOnTimerCanceledListener(func(string) { l.cancelled++ })
	return l
}

// stateTimes records, for each state the run records, how long after the
// start it recorded it, in order.
func stateTimes(env *testsuite.TestWorkflowEnvironment, f *fakeCloud) map[provision.State][]time.Duration {
	start := env.Now()
	at := map[provision.State][]time.Duration{}
	f.onState = func(s provision.State) { at[s] = append(at[s], env.Now().Sub(start)) }
	return at
}

// firstAt is when s was first recorded (0: never).
func firstAt(at map[provision.State][]time.Duration, s provision.State) time.Duration {
	if len(at[s]) == 0 {
		return 0
	}
	return at[s][0]
}

// An agent deploy's callback wait's timer is the agent steps' liveness
// timer too: a deploy whose agent calls back at once starts one timer,
// armed for the heartbeat timeout so that the steps can take it over, and
// cancels none.
func TestAgentDeployStartsOneTimerForItsWaitAndItsSteps(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	timers := watchTimers(env)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	requireActive(t, f)
	if len(timers.started) != 1 || timers.started[0] != 5*time.Minute || timers.cancelled != 0 {
		t.Fatalf("started %v and cancelled %d timers, want one of 5m0s and none cancelled", timers.started, timers.cancelled)
	}
}

// A one-timer wait re-arms its timer every heartbeat timeout and still
// gives up at the callback timeout, not earlier and not later; a heartbeat
// that does not end the wait (no callback URL) moves the deadline as a
// timer reset did before.
func TestOneTimerCallbackWaitEndsAtItsDeadline(t *testing.T) {
	run := func(heartbeatAt time.Duration) (time.Duration, *fakeCloud, *timerLog) {
		f := newFakeCloud()
		env := newEnv(t, f)
		timers := watchTimers(env)
		at := stateTimes(env, f)
		if heartbeatAt > 0 {
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(SignalHeartbeat, Heartbeat{AgentVersion: "1.0"}) // no callback URL: not the call-back
			}, heartbeatAt)
		}
		env.ExecuteWorkflow(DeployNode, deployRequest())
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
			t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
		}
		f.requireTimedOut(t, provision.DeployFailed, "Timeout reached while waiting for callback", "30m0s", "CleanBoot\nSetPower power off")
		return firstAt(at, provision.DeployFailed), f, timers
	}
	quiet, _, timers := run(0)
	if quiet != 30*time.Minute {
		t.Fatalf("the wait failed after %s, want the callback timeout, 30m0s", quiet)
	}
	// Six of the heartbeat timeout, then the failed deploy's operator
	// wait (an hour in these tests).
	if got := fmt.Sprint(timers.started); got != "[5m0s 5m0s 5m0s 5m0s 5m0s 5m0s 1h0m0s]" || timers.cancelled != 0 {
		t.Fatalf("timers %s, %d cancelled: want six of 5m0s before the operator wait's hour, none cancelled", got, timers.cancelled)
	}
	moved, _, _ := run(20*time.Minute + 30*time.Second)
	if moved != 50*time.Minute+30*time.Second {
		t.Fatalf("with a heartbeat at 20m30s the wait failed after %s, want 50m30s", moved)
	}
}

// The steps take over the wait's timer, which was armed when the wait
// began: an agent silent from its call-back on is still declared lost one
// heartbeat timeout after the step began, as with a timer of the step's
// own, not earlier (the timer fires at 5 min, a minute into the step, and
// is armed again for what remains).
func TestOneTimerSilentAgentIsLostOneHeartbeatTimeoutIntoTheStep(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	timers := watchTimers(env)
	at := stateTimes(env, f)
	heartbeatAfter(env, 4*time.Minute)
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(10*time.Hour).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed || !strings.Contains(f.lastErr, "stopped heartbeating") {
		t.Fatalf("final state %q (%q), want deploy failed by a silent agent", last, f.lastErr)
	}
	if failedAt := firstAt(at, provision.DeployFailed); failedAt != 9*time.Minute {
		t.Fatalf("the silent agent was declared lost %s after the deploy began, want 9m0s (call-back at 4m, heartbeat timeout 5m)", failedAt)
	}
	if len(timers.started) != 2 || timers.started[0] != 5*time.Minute || timers.started[1] != 4*time.Minute {
		t.Fatalf("timers %v, want the wait's 5m0s and, when it fired a minute into the step, 4m0s more", timers.started)
	}
}

// A wait after the steps began (the call-back after a firmware update's
// reboot) takes over the timer they left only if it fires by the wait's
// deadline. Here the callback timeout (2 min) is shorter than the
// heartbeat timeout (10 min): the first wait arms 2 min, the first agent
// step (erase_devices_metadata, 10 s to 2m30s) re-arms the timer at 2 min
// for 10 min after its start, to 10m10s; the wait after the update must
// arm a timer of its own and fail 2 min after it began, not at 10m10s.
func TestOneTimerLaterWaitEndsAtItsOwnDeadline(t *testing.T) {
	const update = `[{"interface":"firmware","step":"update","priority":90,"args":{"settings":[{"component":"bios","url":"http://images/bios.bin"}]}}]`
	f, b := firmwareCloud(map[string][]string{"bios": {"AwaitReset", "Completed"}})
	f.node.ProvisionState = provision.Available
	f.node.Policy.CallbackTimeout = 2 * time.Minute
	f.node.Policy.HeartbeatTimeout = 10 * time.Minute
	req := deployRequest()
	req.DeploySteps = []byte(update)
	env := newEnv(t, f)
	b.register(env)
	timers := watchTimers(env)
	at := stateTimes(env, f)
	heartbeatAfter(env, 10*time.Second) // the first call-back; none after the reboot
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(140*time.Second).Return(AgentStepResult{Status: "SUCCEEDED"}, nil).Once()
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.ExecuteWorkflow(DeployNode, req)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if !strings.Contains(f.lastErr, "wait call-back after firmware.update: Timeout reached while waiting for callback") {
		t.Fatalf("last_error %q: want the callback timeout after the update", f.lastErr)
	}
	waits, failedAt := at[provision.DeployWait], firstAt(at, provision.DeployFailed)
	if len(waits) != 2 {
		t.Fatalf("wait call-back recorded at %v, want twice (the boot and the reboot after the update)", waits)
	}
	if !slices.Contains(timers.started, 8*time.Minute+10*time.Second) || waits[1]+2*time.Minute >= 10*time.Minute+10*time.Second {
		t.Fatalf("timers %v, second wait at %s: the steps' timer was not left to fire after the second wait's deadline, the test proves nothing", timers.started, waits[1])
	}
	if failedAt != waits[1]+2*time.Minute {
		t.Fatalf("the deploy failed at %s, want its second wait's start (%s) plus the callback timeout, 2m0s (timers %v)", failedAt, waits[1], timers.started)
	}
}
