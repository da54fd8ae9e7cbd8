package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironflow/ironflow/agent/sim"
)

// TestMetal3DeletesAFailedDeploy: a deploy that failed waits for an operator
// (retry, skip-step, abort), but a failed state is a resting state in
// Ironic, and Metal3's baremetal-operator deletes a host there as it does
// anywhere, through gophercloud: power off, maintenance on, DELETE (204),
// then GET until 404. Each request is accepted at once, none answers 409
// "locked"; the power off ends the operator's wait, and the node's history
// says so at INFO.
func TestMetal3DeletesAFailedDeploy(t *testing.T) {
	uuid := failedDeployNode(t, "metal3-failed-delete-0", "52:54:00:bb:00:31")

	client, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: lab.APIURL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	client.Microversion = "1.93"
	ctx := context.Background()
	if err := nodes.ChangePowerState(ctx, client, uuid, nodes.PowerStateOpts{Target: nodes.PowerOff}).ExtractErr(); err != nil {
		t.Fatalf("power off in deploy failed: %v (want 202 at once)\n%s", err, workerLog())
	}
	waitFor(t, "the power off to complete", 60*time.Second, func() bool {
		n := getNode(t, uuid)
		return n.PowerState != nil && *n.PowerState == "power off" && n.ProvisionState == "deploy failed"
	})
	var hist struct {
		History []struct{ Severity, Event string } `json:"history"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/history", nil, &hist); code != 200 {
		t.Fatalf("history: HTTP %d", code)
	}
	ended := false
	for _, e := range hist.History {
		ended = ended || (e.Severity == "INFO" && strings.Contains(e.Event, `Power action "power off" requested in state "deploy failed": the wait for retry, skip-step or abort ended`))
	}
	if !ended {
		t.Fatalf("no INFO event says the power off ended the wait: %+v", hist.History)
	}
	if err := nodes.SetMaintenance(ctx, client, uuid, nodes.MaintenanceOpts{Reason: "forcing deletion in baremetal-operator"}).ExtractErr(); err != nil {
		t.Fatalf("maintenance: %v", err)
	}
	if err := nodes.Delete(ctx, client, uuid).ExtractErr(); err != nil {
		t.Fatalf("DELETE in deploy failed and maintenance: %v (want 204)\n%s", err, workerLog())
	}
	if _, err := nodes.Get(ctx, client, uuid).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Fatalf("GET after delete: %v, want 404", err)
	}
}

// failedDeployNode is a node whose deploy failed (its image URL answers
// 404) and waits for an operator in deploy failed.
func failedDeployNode(t *testing.T, name, mac string) string {
	t.Helper()
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, name, mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_source", "value": img.URL + "/missing-because-404"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "deploy failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	return uuid
}

// TestCleanFailedRests: a cleaning that failed waits for an operator in
// clean failed; deleting the node in maintenance ends that wait (204, then
// 404), as Ironic deletes a node resting in clean failed.
func TestCleanFailedRests(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "clean-failed-rests-0", "52:54:00:bb:00:32", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": true},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:32"}, sim.Config{FailureRate: 1, FailCommands: []string{"clean.execute_clean_step"}})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "clean failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/maintenance", map[string]any{"reason": "gone"}, nil); code != http.StatusAccepted {
		t.Fatalf("maintenance: %d", code)
	}
	var body map[string]any
	if code, _ := call(t, "DELETE", "/v1/nodes/"+uuid, nil, &body); code != http.StatusNoContent {
		t.Fatalf("DELETE in clean failed and maintenance: %d %v\n%s", code, body, workerLog())
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid, nil, nil); code != http.StatusNotFound {
		t.Fatalf("GET after delete: %d, want 404", code)
	}
	if log := workerLog(); strings.Contains(log, "panic") {
		t.Fatalf("worker panicked:\n%s", log)
	}
}
