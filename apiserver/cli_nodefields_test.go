package apiserver

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestBaremetalCLINodeFields drives traits and chassis with the real
// `baremetal` client. Debian 12's python3-ironicclient (5.0.1) predates
// API 1.82: it has no `node set --shard` nor `shard list`, so shards are
// proven through the API (TestShardFilters), not here.
func TestBaremetalCLINodeFields(t *testing.T) {
	if _, err := os.Stat(baremetalCLI); err != nil {
		t.Skip("SKIPPING the real-client test: /usr/bin/baremetal is missing (apt-get install python3-ironicclient python3-openstackclient)")
	}
	e := newEnv(t)

	var ch map[string]any
	jsonOut(t, e.mustCLI("chassis", "create", "--description", "rack 1", "-f", "json"), &ch)
	cid, _ := ch["uuid"].(string)
	if !isUUID(cid) || ch["description"] != "rack 1" {
		t.Fatalf("created chassis %v", ch)
	}
	var chs []map[string]any
	jsonOut(t, e.mustCLI("chassis", "list", "-f", "json"), &chs)
	if len(chs) != 1 || chs[0]["UUID"] != cid || chs[0]["Description"] != "rack 1" {
		t.Errorf("chassis list %v", chs)
	}
	jsonOut(t, e.mustCLI("chassis", "show", cid, "-f", "json"), &ch)
	if ch["uuid"] != cid {
		t.Errorf("chassis show %v", ch)
	}

	var node map[string]any
	jsonOut(t, e.mustCLI("node", "create", "--driver", "fake-hardware", "--name", "cli-traits", "--chassis-uuid", cid, "-f", "json"), &node)
	if node["chassis_uuid"] != cid {
		t.Errorf("node create --chassis-uuid: %v", node["chassis_uuid"])
	}
	var inChassis []map[string]any
	jsonOut(t, e.mustCLI("node", "list", "--chassis", cid, "-f", "json"), &inChassis)
	if len(inChassis) != 1 || inChassis[0]["Name"] != "cli-traits" {
		t.Errorf("node list --chassis %v", inChassis)
	}

	e.mustCLI("node", "add", "trait", "cli-traits", "CUSTOM_GPU", "HW_CPU_X86_AVX2")
	var traits []map[string]any
	jsonOut(t, e.mustCLI("node", "trait", "list", "cli-traits", "-f", "json"), &traits)
	if len(traits) != 2 || traits[0]["Traits"] != "CUSTOM_GPU" || traits[1]["Traits"] != "HW_CPU_X86_AVX2" {
		t.Errorf("trait list %v", traits)
	}
	e.mustCLI("node", "remove", "trait", "cli-traits", "CUSTOM_GPU")
	jsonOut(t, e.mustCLI("node", "trait", "list", "cli-traits", "-f", "json"), &traits)
	if len(traits) != 1 || traits[0]["Traits"] != "HW_CPU_X86_AVX2" {
		t.Errorf("trait list after remove %v", traits)
	}
	e.mustCLI("node", "remove", "trait", "cli-traits", "--all")
	jsonOut(t, e.mustCLI("node", "trait", "list", "cli-traits", "-f", "json"), &traits)
	if len(traits) != 0 {
		t.Errorf("trait list after remove --all %v", traits)
	}

	errCases := []struct {
		args []string
		want string
	}{
		{[]string{"node", "add", "trait", "cli-traits", "lowercase"}, "Invalid trait. A valid trait must be no longer than 255 characters."},
		{[]string{"chassis", "delete", cid}, "Cannot complete the requested action because chassis " + cid + " contains nodes."},
	}
	for _, c := range errCases {
		r := e.runCLI(c.args...)
		if r.exit == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baremetal %s: exit %d\nstderr: %s\nwant: %s", strings.Join(c.args, " "), r.exit, r.stderr, c.want)
		}
	}

	e.mustCLI("node", "delete", "cli-traits")
	if r := e.runCLI("chassis", "delete", cid); r.exit != 0 || !strings.Contains(r.stdout+r.stderr, "Deleted chassis "+cid) {
		t.Errorf("chassis delete: exit %d\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
	}
	if r := e.do("GET", "/v1/chassis/"+cid, "1.82", nil); r.status != http.StatusNotFound {
		t.Errorf("chassis after delete: %d", r.status)
	}
}
