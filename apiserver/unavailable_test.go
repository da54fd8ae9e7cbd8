package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
)

// downEngine is the fake engine of a Temporal server that does not answer.
type downEngine struct{ *fakeEngine }

func (downEngine) CheckHealth(context.Context) error {
	return serviceerror.NewUnavailable("connection refused")
}

// TestVerbWhileTheEngineIsDown: a provision or power verb is answered 503
// with Ironic's TemporaryFailure, and neither writes the node nor starts
// anything.
func TestVerbWhileTheEngineIsDown(t *testing.T) {
	st := storetest.New(t)
	fe := newFakeEngine(st)
	h, err := New(DefaultConfig(), st, downEngine{fe}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, eng: fe, h: h, srv: srv}
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, provision.Available)
	for _, r := range []struct{ path, target string }{
		{"/v1/nodes/" + uuid + "/states/provision", "active"},
		{"/v1/nodes/" + uuid + "/states/power", "power on"},
	} {
		got := e.do("PUT", r.path, "1.78", map[string]any{"target": r.target})
		if got.status != http.StatusServiceUnavailable || got.faultstring(t) != "Resource temporarily unavailable, please retry." {
			t.Errorf("PUT %s while Temporal is down: %d %s", r.path, got.status, got.body)
		}
	}
	n := e.node(uuid)
	if n.ProvisionState != provision.Available || n.TargetProvisionState != nil || n.TargetPowerState != nil {
		t.Errorf("the refused verbs wrote the node: %s target %v power target %v", n.ProvisionState, n.TargetProvisionState, n.TargetPowerState)
	}
	if len(fe.provisions) != 0 || len(fe.powers) != 0 {
		t.Errorf("the refused verbs started %d provision and %d power workflows", len(fe.provisions), len(fe.powers))
	}
}
