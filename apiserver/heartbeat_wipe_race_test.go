package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// An agent request reads its node, checks it, then writes: a workflow that
// ends the operation and wipes the agent's session (RecordTransition with
// store.AgentSessionKeys dropped) can commit in between. These tests put
// the wipe exactly there on the real PostgreSQL: the wipe's transaction
// holds the node's row, the request reads the node as it was and blocks in
// its write, and only then does the wipe commit. The wiped session must
// stay wiped: a late write that brought back the URL or a token outlives
// the operation, and every later heartbeat is refused for want of the
// token, so nothing ever removes it again.
func TestAgentRequestRacingTheSessionWipeLeavesItWiped(t *testing.T) {
	const token, url = "tok-of-the-ended-operation", "http://192.0.2.7:9999"
	heartbeat := func(uuid string) (string, string, any) {
		return "POST", "/v1/heartbeat/" + uuid, map[string]any{
			"callback_url": url, "agent_token": token, "agent_version": "9.4.0", "agent_verify_ca": "ca"}
	}
	cases := []struct {
		name string
		// state and internal are the node's before the request.
		state    provision.State
		internal map[string]any
		request  func(uuid string) (method, path string, body any)
		// failed is where the wipe takes the node (the workflow's r.fail).
		failed provision.State
	}{{
		name:     "heartbeat of an agent whose URL is known",
		state:    provision.DeployFailed,
		internal: map[string]any{store.KeyAgentToken: token, store.KeyAgentURL: url, store.KeyAgentVerifyCA: "ca"},
		request:  heartbeat,
		failed:   provision.DeployFailed,
	}, {
		name:     "first heartbeat, which claims the URL",
		state:    provision.DeployWait,
		internal: map[string]any{store.KeyAgentToken: token},
		request:  heartbeat,
		failed:   provision.DeployFailed,
	}, {
		name:     "lookup, which issues the token",
		state:    provision.DeployWait,
		internal: map[string]any{},
		request: func(uuid string) (string, string, any) {
			return "GET", "/v1/lookup?node_uuid=" + uuid, nil
		},
		failed: provision.DeployFailed,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
			e.setState(uuid, tc.state)
			if len(tc.internal) > 0 {
				if err := e.st.MergeDriverInternalInfo(ctx, uuid, tc.internal); err != nil {
					t.Fatal(err)
				}
			}
			// The workflow's wipe, held uncommitted: it owns the row.
			wipe, err := e.st.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer wipe.Rollback(ctx)
			if _, err := wipe.Exec(ctx, `UPDATE nodes SET provision_state = $2,
					driver_internal_info = driver_internal_info - $3::text[] WHERE uuid = $1`,
				uuid, tc.failed, store.AgentSessionKeys()); err != nil {
				t.Fatal(err)
			}
			method, path, body := tc.request(uuid)
			var status int
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				status = e.doQuiet(method, path, "1.78", body)
			}()
			// The request has read the node (its read does not wait for
			// the row) and now waits for the row in its write.
			if !storetest.WaitForLockWaiter(t, e.st, finished) {
				t.Fatalf("%s %s answered %d without waiting for the row the wipe holds", method, path, status)
			}
			if err := wipe.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			<-finished
			n := e.node(uuid)
			for _, k := range store.AgentSessionKeys() {
				if v, ok := n.DriverInternalInfo[k]; ok {
					t.Errorf("after the wipe, %s answered %d and the node holds %s = %v again", method, status, k, v)
				}
			}
			if status < http.StatusBadRequest {
				t.Errorf("%s %s answered %d after the session it was checked against was wiped", method, path, status)
			}
		})
	}
}

// doQuiet is do for a goroutine: it reports a failed request as status 0
// instead of failing the test from outside its goroutine.
func (e *env) doQuiet(method, path, version string, body any) int {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return 0
		}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(data))
	if err != nil {
		return 0
	}
	req.Header.Set(headerVersion, version)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}
