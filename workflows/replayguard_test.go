package workflows

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// signedAt is a heartbeat as the API signs it (the stand-in verifier
// macOnly accepts "good-mac"), with its own nonce.
func signedAt(nonce string, at time.Time) Heartbeat {
	return Heartbeat{CallbackURL: agentURL, AgentVersion: "1.0", ReceivedAt: at, Nonce: nonce, MAC: "good-mac"}
}

// A signed heartbeat captured from the workflow's history and sent again
// while the agent is silent changes nothing: the step still fails on the
// heartbeat timeout exactly when it fails without the replays, although
// each replay passed the (MAC) check. Fresh heartbeats at the same times
// do keep the step alive, so the replays would have, had they counted.
func TestReplayedHeartbeatDoesNotKeepASilentAgentAlive(t *testing.T) {
	type send struct {
		at    time.Duration
		nonce string
	}
	run := func(sends []send) (time.Duration, *fakeCloud) {
		f := newFakeCloud()
		f.verifySignal = macOnly
		env := newEnv(t, f)
		start := env.Now()
		for _, s := range sends {
			env.RegisterDelayedCallback(func() {
				// The replay carries the first signal's timestamp, as a
				// captured signal does.
				at := start.Add(time.Minute)
				if s.nonce != "first" {
					at = env.Now()
				}
				env.SignalWorkflow(SignalHeartbeat, signedAt(s.nonce, at))
			}, s.at)
		}
		// The write never finishes; only heartbeats keep it alive.
		env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(10*time.Hour).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
		env.ExecuteWorkflow(DeployNode, deployRequest())
		if env.GetWorkflowError() != nil {
			t.Fatal(env.GetWorkflowError())
		}
		if last := f.states[len(f.states)-1]; last != provision.DeployFailed || !strings.Contains(f.lastErr, "stopped heartbeating") {
			t.Fatalf("final state %q (%q), want deploy failed by a silent agent", last, f.lastErr)
		}
		return env.Now().Sub(start), f
	}
	first := send{time.Minute, "first"}
	quiet, _ := run([]send{first})
	var replays, fresh []send
	replays, fresh = append(replays, first), append(fresh, first)
	for i, at := range []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute} {
		replays = append(replays, send{at, "first"})
		fresh = append(fresh, send{at, fmt.Sprintf("fresh-%d", i)})
	}
	replayed, f := run(replays)
	if replayed != quiet {
		t.Fatalf("with replayed heartbeats the silent agent was declared lost after %s, without them after %s", replayed, quiet)
	}
	if len(f.verdicts) != len(replays) {
		t.Fatalf("verdicts %v, want every replay checked (and passing the MAC check)", f.verdicts)
	}
	kept, _ := run(fresh)
	if kept <= quiet {
		t.Fatalf("fresh heartbeats did not keep the step alive (%s, quiet %s): the test proves nothing", kept, quiet)
	}
}

func TestSignalLedger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var l signalLedger
	if why := l.admit(Heartbeat{Nonce: "a", ReceivedAt: t0}); why != "" {
		t.Fatalf("first signal refused: %s", why)
	}
	if why := l.admit(Heartbeat{Nonce: "a", ReceivedAt: t0}); !strings.Contains(why, "already accepted") {
		t.Fatalf("replay admitted (%q)", why)
	}
	// Out of order but new: accepted (two API processes, signals racing).
	if why := l.admit(Heartbeat{Nonce: "b", ReceivedAt: t0.Add(-time.Second)}); why != "" {
		t.Fatalf("an earlier, new signal refused: %s", why)
	}
	// The window moves on: a and b are forgotten, and their timestamps
	// are below the floor, so they stay refused.
	if why := l.admit(Heartbeat{Nonce: "c", ReceivedAt: t0.Add(SignalReplayWindow + time.Second)}); why != "" {
		t.Fatal(why)
	}
	if len(l.seen) != 1 {
		t.Fatalf("ledger holds %d signals after the window moved, want 1", len(l.seen))
	}
	for _, n := range []string{"a", "b", "new-but-old"} {
		if why := l.admit(Heartbeat{Nonce: n, ReceivedAt: t0}); !strings.Contains(why, "forgotten") {
			t.Fatalf("%s: a signal older than the forgotten ones admitted (%q)", n, why)
		}
	}
	// Bounded whatever the rate.
	for i := range 3 * maxRememberedSignals {
		l.admit(Heartbeat{Nonce: fmt.Sprint("n", i), ReceivedAt: t0.Add(SignalReplayWindow + 2*time.Second + time.Duration(i)*time.Millisecond)})
	}
	if len(l.seen) > maxRememberedSignals {
		t.Fatalf("ledger holds %d signals, bound %d", len(l.seen), maxRememberedSignals)
	}
	if why := l.admit(Heartbeat{Nonce: "n0", ReceivedAt: t0.Add(SignalReplayWindow + 2*time.Second)}); why == "" {
		t.Fatal("a signal dropped from the full ledger was admitted again")
	}
}
