package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/shadow"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/store/storetest"
	"github.com/ironflow/ironflow/workflows"
)

// FinalizeRescue sends the agent the stored hash (hashed true) with the
// agent token; ForgetRescuePassword then removes it from the node.
func TestFinalizeRescueSendsTheStoredHashAndForgetRemovesIt(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	hash, _ := shadow.Hash("pw")
	var got struct {
		Name   string         `json:"name"`
		Params map[string]any `json:"params"`
	}
	var token string
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token = r.URL.Query().Get("agent_token")
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","command_name":"rescue.finalize_rescue","command_status":"SUCCEEDED","command_error":null,"command_result":null}`)
	}))
	defer agentSrv.Close()
	n := &store.Node{Driver: "fake-hardware", ProvisionState: workflows.StateRescueWait,
		InstanceInfo:       map[string]any{store.KeyHashedRescuePassword: hash, "image_source": "http://x/img"},
		DriverInternalInfo: map[string]any{store.KeyAgentToken: "tok-0123456789abcdefghijklmnopqrstuvwxyz", store.KeyAgentURL: agentSrv.URL}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.FinalizeRescue(ctx, workflows.AgentInput{NodeUUID: n.UUID, CallbackURL: agentSrv.URL}); err != nil {
		t.Fatalf("FinalizeRescue: %v", err)
	}
	if got.Name != "rescue.finalize_rescue" || got.Params["rescue_password"] != hash || got.Params["hashed"] != true || token != "tok-0123456789abcdefghijklmnopqrstuvwxyz" {
		t.Fatalf("the agent got %+v with token %q", got, token)
	}
	if err := a.ForgetRescuePassword(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	after, _ := st.GetNode(ctx, n.UUID)
	if _, ok := after.InstanceInfo[store.KeyHashedRescuePassword]; ok || after.InstanceInfo["image_source"] != "http://x/img" {
		t.Fatalf("after ForgetRescuePassword: %v", after.InstanceInfo)
	}
	// Without a stored hash there is nothing to send: not retried.
	err := a.FinalizeRescue(ctx, workflows.AgentInput{NodeUUID: n.UUID, CallbackURL: agentSrv.URL})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeInvalidConfig {
		t.Fatalf("FinalizeRescue without a password: %v", err)
	}
}
