package worker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// The VerifySignal activity the worker registers accepts what the API signs
// with the shared key and refuses a signal without a MAC.
func TestVerifySignalChecksTheSharedKey(t *testing.T) {
	keys := signature.Keys{Current: []byte("worker-test-signal-key-0123")}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(signalVerifier{keys: keys}.verify, activity.RegisterOptions{Name: workflows.ActVerifySignal})
	node := "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	signed := workflows.Heartbeat{CallbackURL: "https://10.0.0.5:9999", ReceivedAt: time.Now()}
	signature.Sign(keys.Current, node, &signed)
	for name, c := range map[string]struct {
		hb        workflows.Heartbeat
		authentic bool
	}{
		"signed":   {signed, true},
		"unsigned": {workflows.Heartbeat{CallbackURL: "http://10.0.0.66:9999", ReceivedAt: time.Now()}, false},
	} {
		v, err := runVerify(env, node, c.hb)
		if err != nil {
			t.Fatal(err)
		}
		if (v.Reason == "") != c.authentic {
			t.Errorf("%s: verdict %+v, authentic want %v", name, v, c.authentic)
		}
	}
}

// The verifier refuses a signed signal that names another agent token than
// the node holds now: an earlier operation's signal, sent again.
func TestVerifySignalRefusesAnEarlierOperationsSignal(t *testing.T) {
	keys := signature.Keys{Current: []byte("worker-test-signal-key-0123")}
	node := "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	current := "rbEz4Mg0tM6qCzLrh9NTnMSNQi4dcoXdx4MmjZ8NNCE"
	v := signalVerifier{keys: keys, tokens: func(context.Context, string) (string, error) { return current, nil }}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(v.verify, activity.RegisterOptions{Name: workflows.ActVerifySignal})
	for name, c := range map[string]struct {
		token     string
		authentic bool
	}{
		"this operation's token":       {current, true},
		"an earlier operation's token": {"T2xkIG9wZXJhdGlvbidzIHRva2VuLCB3aXBlZCBub3c", false},
		"no token":                     {"", false},
		// An API of the release before names no token (upgrade order:
		// workers first); its signal is accepted unbound.
		"old API": {"", true},
	} {
		hb := workflows.Heartbeat{CallbackURL: "https://10.0.0.5:9999", ReceivedAt: time.Now(), AgentTokenRef: signature.TokenRef(c.token)}
		signature.Sign(keys.Current, node, &hb)
		if name == "old API" {
			hb.MAC = oldAPIMAC(keys.Current, node, hb)
		}
		got, err := runVerify(env, node, hb)
		if err != nil {
			t.Fatal(err)
		}
		if (got.Reason == "") != c.authentic {
			t.Errorf("%s: verdict %+v, authentic want %v", name, got, c.authentic)
		}
	}
}

// oldAPIMAC is the MAC an API of the release before computed (package
// signature's version 1), written out here as that release had it.
func oldAPIMAC(key []byte, node string, hb workflows.Heartbeat) string {
	covered, _ := json.Marshal(struct {
		Node, CallbackURL, AgentVersion, AgentVerifyCA, AgentStatus, AgentStatusMessage, Nonce string
		ReceivedAt                                                                             int64
	}{node, hb.CallbackURL, hb.AgentVersion, hb.AgentVerifyCA, hb.AgentStatus, hb.AgentStatusMessage, hb.Nonce, hb.ReceivedAt.UnixNano()})
	h := hmac.New(sha256.New, key)
	h.Write([]byte("ironflow heartbeat v1\x00"))
	h.Write(covered)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// A heartbeat signal checked while the database does not answer waits for
// it, and is accepted once the node's token can be read; one that would be
// too old to accept by then, or a database that answers with an error, is
// not waited for.
func TestVerifySignalWaitsOutTheDatabase(t *testing.T) {
	keys := signature.Keys{Current: []byte("worker-test-signal-key-0123")}
	node := "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	current := "rbEz4Mg0tM6qCzLrh9NTnMSNQi4dcoXdx4MmjZ8NNCE"
	down := fmt.Errorf("read agent token of node %s: %w", node, store.ErrUnavailable)
	for name, c := range map[string]struct {
		failures   int
		err        error
		age        time.Duration
		authentic  bool
		wantReads  int
		wantFailed bool
	}{
		"the database back after two tries": {failures: 2, err: down, authentic: true, wantReads: 3},
		"a signal too old to wait for":      {failures: 2, err: down, age: signature.MaxAge - 20*time.Second, wantReads: 1, wantFailed: true},
		"the database answers an error":     {failures: 2, err: errors.New("permission denied for table nodes"), wantReads: 1, wantFailed: true},
	} {
		t.Run(name, func(t *testing.T) {
			reads := 0
			v := signalVerifier{keys: keys, tokens: func(context.Context, string) (string, error) {
				reads++
				if reads <= c.failures {
					return "", c.err
				}
				return current, nil
			}}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(v.verify, activity.RegisterOptions{Name: workflows.ActVerifySignal})
			hb := workflows.Heartbeat{CallbackURL: "https://10.0.0.5:9999", ReceivedAt: time.Now().Add(-c.age), AgentTokenRef: signature.TokenRef(current)}
			signature.Sign(keys.Current, node, &hb)
			got, err := runVerify(env, node, hb)
			if reads != c.wantReads {
				t.Errorf("the token was read %d times, want %d", reads, c.wantReads)
			}
			if c.wantFailed {
				if err == nil {
					t.Fatal("the check did not fail")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got.Reason == "") != c.authentic {
				t.Errorf("verdict %+v, authentic want %v", got, c.authentic)
			}
		})
	}
}

// runVerify runs the registered VerifySignal activity on hb and decodes
// its verdict.
func runVerify(env *testsuite.TestActivityEnvironment, node string, hb workflows.Heartbeat) (workflows.SignalVerdict, error) {
	var v workflows.SignalVerdict
	val, err := env.ExecuteActivity(workflows.ActVerifySignal, workflows.VerifySignalInput{NodeUUID: node, Heartbeat: hb})
	if err != nil {
		return v, err
	}
	return v, val.Get(&v)
}
