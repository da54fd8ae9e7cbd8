package apiserver

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestBaremetalCLIPortgroupsAndVIFs drives port groups and VIFs with the
// real `baremetal` client: port group create/list/show/delete, port create
// --port-group, node vif attach/list/detach.
func TestBaremetalCLIPortgroupsAndVIFs(t *testing.T) {
	if _, err := os.Stat(baremetalCLI); err != nil {
		t.Skip("SKIPPING the real-client test: /usr/bin/baremetal is missing (apt-get install python3-ironicclient python3-openstackclient)")
	}
	e := newEnv(t)
	var node map[string]any
	jsonOut(t, e.mustCLI("node", "create", "--driver", "fake-hardware", "--name", "net-node", "--network-interface", "flat", "-f", "json"), &node)
	uuid := node["uuid"].(string)
	if node["network_interface"] != "flat" {
		t.Errorf("network_interface %v", node["network_interface"])
	}

	var group map[string]any
	jsonOut(t, e.mustCLI("port", "group", "create", "--node", uuid, "--address", "52:54:00:CC:00:01", "--name", "bond0",
		"--mode", "802.3ad", "--property", "miimon=100", "-f", "json"), &group)
	if group["address"] != "52:54:00:cc:00:01" || group["name"] != "bond0" || group["mode"] != "802.3ad" ||
		group["node_uuid"] != uuid || group["standalone_ports_supported"] != true {
		t.Errorf("port group create %v", group)
	}
	if props, _ := group["properties"].(map[string]any); fmt.Sprint(props["miimon"]) != "100" {
		t.Errorf("properties %v", group["properties"])
	}
	groupUUID := group["uuid"].(string)

	var groups []map[string]any
	jsonOut(t, e.mustCLI("port", "group", "list", "-f", "json"), &groups)
	if len(groups) != 1 || groups[0]["UUID"] != groupUUID || groups[0]["Address"] != "52:54:00:cc:00:01" || groups[0]["Name"] != "bond0" {
		t.Errorf("port group list %v", groups)
	}
	jsonOut(t, e.mustCLI("port", "group", "list", "--node", uuid, "--long", "-f", "json"), &groups)
	if len(groups) != 1 || groups[0]["Mode"] != "802.3ad" {
		t.Errorf("port group list --node --long %v", groups)
	}
	var shown map[string]any
	jsonOut(t, e.mustCLI("port", "group", "show", "bond0", "-f", "json"), &shown)
	if shown["uuid"] != groupUUID {
		t.Errorf("port group show %v", shown)
	}

	var port map[string]any
	jsonOut(t, e.mustCLI("port", "create", "52:54:00:aa:00:01", "--node", uuid, "--port-group", groupUUID, "-f", "json"), &port)
	if port["portgroup_uuid"] != groupUUID {
		t.Errorf("port create --port-group %v", port)
	}
	var ports []map[string]any
	jsonOut(t, e.mustCLI("port", "list", "--port-group", groupUUID, "-f", "json"), &ports)
	if len(ports) != 1 || ports[0]["UUID"] != port["uuid"] {
		t.Errorf("port list --port-group %v", ports)
	}

	// VIFs: the group takes the first.
	const vif = "3f1e1b8a-93b4-4b3e-8c59-5b7c7b0d0001"
	e.mustCLI("node", "vif", "attach", "net-node", vif)
	var vifs []map[string]any
	jsonOut(t, e.mustCLI("node", "vif", "list", "net-node", "-f", "json"), &vifs)
	if len(vifs) != 1 || vifs[0]["ID"] != vif {
		t.Errorf("node vif list %v", vifs)
	}
	jsonOut(t, e.mustCLI("port", "group", "show", groupUUID, "-f", "json"), &shown)
	if ii, _ := shown["internal_info"].(map[string]any); ii[tenantVIFKey] != vif {
		t.Errorf("group internal_info after attach %v", shown["internal_info"])
	}

	errCases := []struct {
		args []string
		want string
	}{
		{[]string{"node", "vif", "attach", "net-node", "3f1e1b8a-93b4-4b3e-8c59-5b7c7b0d0002"},
			"Unable to attach VIF 3f1e1b8a-93b4-4b3e-8c59-5b7c7b0d0002, not enough free physical ports. (HTTP 400)"},
		{[]string{"node", "vif", "detach", "net-node", "3f1e1b8a-93b4-4b3e-8c59-5b7c7b0d0002"},
			"Unable to detach VIF 3f1e1b8a-93b4-4b3e-8c59-5b7c7b0d0002 from node " + uuid + " because it is not attached to it. (HTTP 400)"},
		{[]string{"port", "group", "delete", groupUUID},
			"Cannot complete the requested action because portgroup " + groupUUID + " contains ports. (HTTP 400)"},
		{[]string{"port", "group", "show", "no-such-group"},
			"Portgroup no-such-group could not be found. (HTTP 404)"},
	}
	for _, c := range errCases {
		r := e.runCLI(c.args...)
		if r.exit == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baremetal %s: exit %d\nstderr: %s\nwant: %s", strings.Join(c.args, " "), r.exit, r.stderr, c.want)
		}
	}

	e.mustCLI("node", "vif", "detach", "net-node", vif)
	jsonOut(t, e.mustCLI("node", "vif", "list", "net-node", "-f", "json"), &vifs)
	if len(vifs) != 0 {
		t.Errorf("node vif list after detach %v", vifs)
	}
	e.mustCLI("port", "delete", port["uuid"].(string))
	if r := e.runCLI("port", "group", "delete", groupUUID); r.exit != 0 || !strings.Contains(r.stdout+r.stderr, "Deleted port group "+groupUUID) {
		t.Errorf("port group delete: exit %d\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
	}
	jsonOut(t, e.mustCLI("port", "group", "list", "-f", "json"), &groups)
	if len(groups) != 0 {
		t.Errorf("port group list after delete %v", groups)
	}
}
