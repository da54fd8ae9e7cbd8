package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/shadow"
	"github.com/ironflow/ironflow/store"
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
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.RescueWait,
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

// The rescue agent network-boots driver_info rescue_kernel and
// rescue_ramdisk when the node sets them (Ironic's keys), the agent's own
// images otherwise.
func TestPrepareBootForRescueUsesTheRescueImages(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{BootURL: "http://boot"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		info         map[string]any
		kernel, fail string
	}{
		{map[string]any{"rescue_kernel": "http://r/k", "rescue_ramdisk": "http://r/i", "deploy_kernel": "http://d/k", "deploy_ramdisk": "http://d/i"}, "http://r/k", ""},
		{map[string]any{"deploy_kernel": "http://d/k", "deploy_ramdisk": "http://d/i"}, "http://d/k", ""},
		{map[string]any{}, "http://boot/images/agent.kernel", ""},
		{map[string]any{"rescue_kernel": "http://r/k"}, "", "rescue_kernel and rescue_ramdisk go together"},
	} {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Rescuing, DriverInfo: c.info}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		err := a.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootMode: "bios", MACs: []string{"52:54:00:00:00:01"}}, Kind: workflows.BootRescue})
		if c.fail != "" {
			if err == nil || !strings.Contains(err.Error(), c.fail) {
				t.Errorf("%v: %v, want %q", c.info, err, c.fail)
			}
			continue
		}
		bc, gerr := st.GetBootConfig(ctx, n.UUID)
		if err != nil || gerr != nil || bc.KernelURL != c.kernel {
			t.Errorf("%v: boot config %+v (%v, %v), want kernel %s", c.info, bc, err, gerr, c.kernel)
		}
	}
}
