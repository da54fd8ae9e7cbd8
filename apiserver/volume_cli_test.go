package apiserver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/worker"
)

// TestBaremetalCLIVolumeAndConductors drives volume connectors and targets
// and the conductor list with the real `baremetal` client.
func TestBaremetalCLIVolumeAndConductors(t *testing.T) {
	if _, err := os.Stat(baremetalCLI); err != nil {
		t.Skip("SKIPPING the real-client test: /usr/bin/baremetal is missing (apt-get install python3-ironicclient python3-openstackclient)")
	}
	e := newEnv(t)
	node := e.poweredOffNode("cli-vol")

	var vc map[string]any
	jsonOut(t, e.mustCLI("volume", "connector", "create", "--node", node, "--type", "iqn",
		"--connector-id", "iqn.2010-10.org.openstack:cli", "--extra", "rack=r1", "-f", "json"), &vc)
	id, _ := vc["uuid"].(string)
	if !isUUID(id) || vc["node_uuid"] != node || vc["type"] != "iqn" || vc["extra"].(map[string]any)["rack"] != "r1" {
		t.Fatalf("created connector %v", vc)
	}
	var connectors []map[string]any
	jsonOut(t, e.mustCLI("volume", "connector", "list", "--node", node, "-f", "json"), &connectors)
	if len(connectors) != 1 || connectors[0]["UUID"] != id || connectors[0]["Connector ID"] != "iqn.2010-10.org.openstack:cli" {
		t.Errorf("connector list %v", connectors)
	}
	jsonOut(t, e.mustCLI("volume", "connector", "list", "--long", "-f", "json"), &connectors)
	if len(connectors) != 1 || connectors[0]["Node UUID"] != node {
		t.Errorf("connector list --long %v", connectors)
	}
	var shown map[string]any
	jsonOut(t, e.mustCLI("volume", "connector", "show", id, "-f", "json"), &shown)
	if shown["connector_id"] != "iqn.2010-10.org.openstack:cli" || shown["created_at"] == nil {
		t.Errorf("connector show %v", shown)
	}

	var vt map[string]any
	jsonOut(t, e.mustCLI("volume", "target", "create", "--node", node, "--type", "iscsi", "--boot-index", "0",
		"--volume-id", "vol-cli", "--property", "target_lun=0", "-f", "json"), &vt)
	if vt["volume_type"] != "iscsi" || vt["boot_index"] != float64(0) || vt["volume_id"] != "vol-cli" {
		t.Fatalf("created target %v", vt)
	}
	var targets []map[string]any
	jsonOut(t, e.mustCLI("volume", "target", "list", "--node", node, "-f", "json"), &targets)
	if len(targets) != 1 || targets[0]["Volume ID"] != "vol-cli" || targets[0]["Boot Index"] != float64(0) {
		t.Errorf("target list %v", targets)
	}

	errCases := []struct {
		args []string
		want string
	}{
		{[]string{"volume", "target", "create", "--node", node, "--type", "iscsi", "--boot-index", "0", "--volume-id", "vol-2"},
			"A volume target with boot index '0' for the same node already exists. (HTTP 409)"},
		{[]string{"volume", "connector", "create", "--node", "00000000-0000-0000-0000-000000000009", "--type", "ip", "--connector-id", "10.0.0.9"},
			"Node 00000000-0000-0000-0000-000000000009 could not be found. (HTTP 400)"},
	}
	for _, c := range errCases {
		if r := e.runCLI(c.args...); r.exit == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baremetal %s: exit %d\nstderr: %s\nwant: %s", strings.Join(c.args, " "), r.exit, r.stderr, c.want)
		}
	}

	e.setPower(node, "power on")
	r := e.runCLI("volume", "connector", "delete", id)
	if want := `The requested action "volume connector deletion" can not be performed on node "` + node + `" while it is in state "power on". (HTTP 400)`; r.exit == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("delete while powered on: exit %d\nstderr: %s", r.exit, r.stderr)
	}
	e.setPower(node, "power off")
	if r := e.runCLI("volume", "connector", "delete", id); r.exit != 0 || !strings.Contains(r.stdout+r.stderr, "Deleted volume connector "+id) {
		t.Errorf("volume connector delete: exit %d\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
	}
	jsonOut(t, e.mustCLI("volume", "connector", "list", "-f", "json"), &connectors)
	if len(connectors) != 0 {
		t.Errorf("connectors after delete %v", connectors)
	}

	stop, err := worker.Announce(context.Background(), e.st, worker.Conductor{Hostname: "cli-worker", ConductorGroups: []string{"rack1"}, Interval: time.Hour}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var conductors []map[string]any
	jsonOut(t, e.mustCLI("conductor", "list", "-f", "json"), &conductors)
	if len(conductors) != 1 || conductors[0]["Hostname"] != "cli-worker" || conductors[0]["Conductor Group"] != "rack1" || conductors[0]["Alive"] != true {
		t.Errorf("conductor list %v", conductors)
	}
	var cond map[string]any
	jsonOut(t, e.mustCLI("conductor", "show", "cli-worker", "-f", "json"), &cond)
	if cond["hostname"] != "cli-worker" || cond["alive"] != true || len(cond["drivers"].([]any)) == 0 {
		t.Errorf("conductor show %v", cond)
	}
	if r := e.runCLI("conductor", "show", "nobody"); r.exit == 0 || !strings.Contains(r.stderr, "Conductor nobody could not be found. (HTTP 404)") {
		t.Errorf("conductor show nobody: exit %d\nstderr: %s", r.exit, r.stderr)
	}
}
