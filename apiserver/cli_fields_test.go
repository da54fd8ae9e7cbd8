package apiserver

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/portgroups"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// portCreate is a port create body with the fields gophercloud's
// CreateOpts does not know yet (API 1.97-1.111).
type portCreate map[string]any

func (p portCreate) ToPortCreateMap() (map[string]any, error) { return p, nil }

// portListQuery is a list query gophercloud's ListOpts does not know.
type portListQuery string

func (q portListQuery) ToPortListQuery() (string, error)       { return "?" + string(q), nil }
func (q portListQuery) ToPortListDetailQuery() (string, error) { return "?" + string(q), nil }

// TestGophercloudPortFields drives the port and port group fields and
// filters of 1.97-1.111 with gophercloud, the Go client Metal3 uses: a
// create with description, vendor, category and
// available_for_dynamic_portgroup, JSON-patch updates, the conductor_groups
// filter, and a port group's physical network reaching its port.
func TestGophercloudPortFields(t *testing.T) {
	serveUpTo(t, v111DynamicPortgroup)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "conductor_group": "rack-9"})["uuid"].(string)
	other := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	client, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: e.srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	client.Microversion = "1.111"
	ctx := context.Background()

	g, err := portgroups.Create(ctx, client, portgroups.CreateOpts{NodeUUID: node, Name: "bond0"}).Extract()
	if err != nil {
		t.Fatalf("portgroup create: %v", err)
	}
	res := ports.Create(ctx, client, portCreate{"address": "52:54:00:de:00:01", "node_uuid": node, "portgroup_uuid": g.UUID,
		"description": "uplink", "vendor": "mellanox", "category": "storage", "available_for_dynamic_portgroup": false})
	if res.Err != nil {
		t.Fatalf("port create: %v", res.Err)
	}
	created := res.Body.(map[string]any)
	if created["description"] != "uplink" || created["vendor"] != "mellanox" || created["category"] != "storage" || created["available_for_dynamic_portgroup"] != false {
		t.Errorf("created port %v", created)
	}
	id := created["uuid"].(string)
	if _, err := ports.Create(ctx, client, portCreate{"address": "52:54:00:de:00:02", "node_uuid": other}).Extract(); err != nil {
		t.Fatalf("port create: %v", err)
	}

	upd := ports.Update(ctx, client, id, ports.UpdateOpts{
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/description", Value: "uplink to tor-1"},
		ports.UpdateOperation{Op: ports.RemoveOp, Path: "/vendor"},
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/available_for_dynamic_portgroup", Value: true},
	})
	if upd.Err != nil {
		t.Fatalf("port update: %v", upd.Err)
	}
	updated := upd.Body.(map[string]any)
	if updated["description"] != "uplink to tor-1" || updated["vendor"] != nil || updated["available_for_dynamic_portgroup"] != true {
		t.Errorf("updated port %v", updated)
	}

	var listed []string
	err = ports.List(client, portListQuery("conductor_groups=rack-9")).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ps, err := ports.ExtractPorts(p)
		for _, port := range ps {
			listed = append(listed, port.Address)
		}
		return true, err
	})
	if err != nil || strings.Join(listed, ",") != "52:54:00:de:00:01" {
		t.Errorf("ports in conductor group rack-9: %v (%v)", listed, err)
	}

	// gophercloud has no port group update: its client's PATCH.
	var pg map[string]any
	_, err = client.Patch(ctx, client.ServiceURL("portgroups", g.UUID), []map[string]any{
		{"op": "add", "path": "/physical_network", "value": "physnet1"},
		{"op": "add", "path": "/category", "value": "bond"},
	}, &pg, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if err != nil {
		t.Fatalf("portgroup update: %v", err)
	}
	if pg["physical_network"] != "physnet1" || pg["category"] != "bond" || pg["dynamic_portgroup"] != false {
		t.Errorf("updated portgroup %v", pg)
	}
	if got := ports.Get(ctx, client, id); got.Err != nil || got.Body.(map[string]any)["physical_network"] != "physnet1" {
		t.Errorf("port after its group's physical_network: %v (%v)", got.Body, got.Err)
	}
	err = ports.Update(ctx, client, id, ports.UpdateOpts{ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/physical_network", Value: "physnet2"}}).Err
	if err == nil || !strings.Contains(err.Error(), "physical_network cannot be changed while the port belongs to a portgroup.") {
		t.Errorf("member port's physical_network update: %v, want Ironic's 400", err)
	}

	// Below the versions the client's create is refused, as Ironic's.
	client.Microversion = "1.96"
	err = ports.Create(ctx, client, portCreate{"address": "52:54:00:de:00:03", "node_uuid": node, "description": "x"}).Err
	if err == nil || !strings.Contains(err.Error(), "406") {
		t.Errorf("create with description at 1.96: %v, want 406", err)
	}
}

// TestBaremetalCLIShowsNewFields: the unmodified `baremetal` client, asked
// for 1.115, shows what the server sends: a port's and a port group's new
// fields, and a node history event's project, state,
// target_provision_state and duration_seconds; asked for 1.96 it sees none
// of them.
func TestBaremetalCLIShowsNewFields(t *testing.T) {
	if _, err := os.Stat(baremetalCLI); err != nil {
		t.Skip("SKIPPING the real-client test: /usr/bin/baremetal is missing (apt-get install python3-ironicclient python3-openstackclient)")
	}
	serveUpTo(t, v115NodeHistoryFields)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "name": "cli-fields"})["uuid"].(string)
	g := e.do("POST", "/v1/portgroups", "1.115", map[string]any{"node_uuid": node, "name": "bond0", "physical_network": "physnet1", "category": "bond"})
	if g.status != 201 {
		t.Fatalf("portgroup: %d %s", g.status, g.body)
	}
	p := e.do("POST", "/v1/ports", "1.115", map[string]any{"node_uuid": node, "address": "52:54:00:de:01:01", "description": "uplink", "vendor": "intel", "category": "data"})
	if p.status != 201 {
		t.Fatalf("port: %d %s", p.status, p.body)
	}
	portID := p.json(t)["uuid"].(string)
	if r := e.do("PUT", "/v1/nodes/"+node+"/states/provision", "1.115", map[string]any{"target": "manage"}); r.status != 202 {
		t.Fatalf("manage: %d %s", r.status, r.body)
	}

	var port map[string]any
	jsonOut(t, e.mustCLI("--os-baremetal-api-version", "1.115", "port", "show", portID, "-f", "json"), &port)
	if port["description"] != "uplink" || port["vendor"] != "intel" || port["category"] != "data" || port["available_for_dynamic_portgroup"] != true {
		t.Errorf("port show at 1.115: %v", port)
	}
	port = nil
	jsonOut(t, e.mustCLI("--os-baremetal-api-version", "1.96", "port", "show", portID, "-f", "json"), &port)
	for _, k := range []string{"description", "vendor", "category", "available_for_dynamic_portgroup"} {
		if _, ok := port[k]; ok {
			t.Errorf("port show at 1.96 has %s: %v", k, port)
		}
	}
	var group map[string]any
	jsonOut(t, e.mustCLI("--os-baremetal-api-version", "1.115", "port", "group", "show", "bond0", "-f", "json"), &group)
	if group["physical_network"] != "physnet1" || group["category"] != "bond" || group["dynamic_portgroup"] != false {
		t.Errorf("port group show at 1.115: %v", group)
	}

	var events []map[string]any
	jsonOut(t, e.mustCLI("node", "history", "list", node, "-f", "json"), &events)
	if len(events) == 0 {
		t.Fatal("no history")
	}
	eventID, _ := events[len(events)-1]["UUID"].(string)
	var ev map[string]any
	jsonOut(t, e.mustCLI("--os-baremetal-api-version", "1.115", "node", "history", "get", node, eventID, "-f", "json"), &ev)
	if ev["state"] != "enroll" || ev["target_provision_state"] != nil {
		t.Errorf("history event at 1.115: %v, want the state manage left (enroll)", ev)
	}
	for _, k := range []string{"project", "duration_seconds"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("history event at 1.115 has no %s: %v", k, ev)
		}
	}
	ev = nil
	jsonOut(t, e.mustCLI("--os-baremetal-api-version", "1.112", "node", "history", "get", node, eventID, "-f", "json"), &ev)
	for _, k := range []string{"project", "state", "duration_seconds"} {
		if _, ok := ev[k]; ok {
			t.Errorf("history event at 1.112 has %s: %v", k, ev)
		}
	}
}
