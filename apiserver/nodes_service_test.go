package apiserver

import (
	"context"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// TestServiceVerb: the service verb (API 1.87) from active with
// service_steps starts ServiceNode with them; below 1.87 it is 406,
// without steps or with steps for another verb 400 with Ironic's
// messages; service_step is a node field from 1.87.
func TestServiceVerb(t *testing.T) {
	serveUpTo(t, v87Service)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "sv"})["uuid"].(string)
	steps := []any{map[string]any{"interface": "deploy", "step": "erase_pstore"}}
	cases := []struct {
		name   string
		state  provision.State
		ver    string
		body   map[string]any
		status int
		msg    string
	}{
		{"below 1.87", "active", "1.86", map[string]any{"target": "service", "service_steps": steps}, 406, "Request not acceptable."},
		{"without steps", "active", "1.87", map[string]any{"target": "service"}, 400,
			`"service_steps" is required when setting target provision state to service`},
		{"steps for clean", "manageable", "1.87", map[string]any{"target": "clean", "clean_steps": steps, "service_steps": steps}, 400,
			`"service_steps" is only valid when setting target provision state to service`},
		{"not active", "available", "1.87", map[string]any{"target": "service", "service_steps": steps}, 400,
			provision.NotAllowed("service", uuid, "available")},
		{"unknown step", "active", "1.87", map[string]any{"target": "service", "service_steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices"}}}, 400,
			"Cannot service node " + uuid + ": node does not support this service step: {'interface': 'deploy', 'step': 'erase_devices'}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.setState(uuid, c.state)
			r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", c.ver, c.body)
			if r.status != c.status || r.faultstring(t) != c.msg {
				t.Errorf("%d %s, want %d %s", r.status, r.faultstring(t), c.status, c.msg)
			}
		})
	}

	e.setState(uuid, "active")
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.87", map[string]any{"target": "service", "service_steps": steps}); r.status != 202 {
		t.Fatalf("service: %d %s", r.status, r.body)
	}
	last := e.eng.provisions[len(e.eng.provisions)-1]
	if last.Verb != "service" || !strings.Contains(string(last.ServiceSteps), `"erase_pstore"`) || len(last.CleanSteps) != 0 {
		t.Errorf("request %+v", last)
	}
	if n := e.node(uuid); n.ProvisionState != "servicing" || *n.TargetProvisionState != "active" {
		t.Errorf("after service: %s %v", n.ProvisionState, n.TargetProvisionState)
	}
	if _, ok := e.do("GET", "/v1/nodes/"+uuid, "1.87", nil).json(t)["service_step"]; !ok {
		t.Error("no service_step at 1.87")
	}
	if _, ok := e.do("GET", "/v1/nodes/"+uuid, "1.86", nil).json(t)["service_step"]; ok {
		t.Error("service_step at 1.86")
	}
}

// TestServiceWithRunbook: at 1.92 a runbook gives the service verb its
// steps (service_steps, not clean_steps).
func TestServiceWithRunbook(t *testing.T) {
	needRunbookVersion(t)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	if err := e.st.CreateRunbook(context.Background(), &store.Runbook{Name: "CUSTOM_SVC",
		Steps: []store.RunbookStep{{Interface: "deploy", Step: "erase_pstore", Order: 0}}}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/traits/CUSTOM_SVC", vRunbooks, nil); r.status != 204 {
		t.Fatalf("add trait: %d %s", r.status, r.body)
	}
	e.setState(uuid, "active")
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", vRunbooks, map[string]any{"target": "service", "runbook": "CUSTOM_SVC"}); r.status != 202 {
		t.Fatalf("service with a runbook: %d %s", r.status, r.body)
	}
	last := e.eng.provisions[len(e.eng.provisions)-1]
	if !strings.Contains(string(last.ServiceSteps), `"erase_pstore"`) || len(last.CleanSteps) != 0 {
		t.Errorf("request %+v", last)
	}
}

// TestV1DocumentListsTemplatesAndRunbooks: as Ironic's root, /v1 links
// deploy_templates from 1.55 and runbooks from 1.92.
func TestV1DocumentListsTemplatesAndRunbooks(t *testing.T) {
	needRunbookVersion(t)
	e := newEnv(t)
	for _, c := range []struct {
		ver                string
		templates, runbook bool
	}{{"1.54", false, false}, {"1.55", true, false}, {"1.91", true, false}, {"1.92", true, true}} {
		doc := e.do("GET", "/v1", c.ver, nil).json(t)
		if _, ok := doc["deploy_templates"]; ok != c.templates {
			t.Errorf("%s: deploy_templates link %v, want %v", c.ver, ok, c.templates)
		}
		if _, ok := doc["runbooks"]; ok != c.runbook {
			t.Errorf("%s: runbooks link %v, want %v", c.ver, ok, c.runbook)
		}
	}
}
