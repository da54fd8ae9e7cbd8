package apiserver

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/baremetalcli"
)

// baremetalCLI is the unmodified client from Debian's python3-ironicclient.
const baremetalCLI = "/usr/bin/baremetal"

// cliTimeout bounds one CLI invocation (the client retries a 409 five times,
// 2 s apart).
const cliTimeout = 60 * time.Second

type cliResult struct {
	stdout, stderr string
	exit           int
}

// runCLI runs `baremetal args...` against the test server, through the
// test process's fork server of the unmodified CLI (baremetalcli: the
// CLI's own entry point, its imports paid once).
func (e *env) runCLI(args ...string) cliResult {
	e.t.Helper()
	cli, err := baremetalcli.Shared()
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	r, err := cli.Run(ctx, append(os.Environ(), "OS_ENDPOINT="+e.srv.URL, "OS_AUTH_TYPE=none", "OS_CLOUD=", "HOME="+e.t.TempDir()), args...)
	if err != nil {
		e.t.Fatalf("baremetal %v: %v (no answer within %v?)", args, err, cliTimeout)
	}
	return cliResult{stdout: r.Stdout, stderr: r.Stderr, exit: r.Exit}
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func (e *env) mustCLI(args ...string) string {
	e.t.Helper()
	r := e.runCLI(args...)
	if r.exit != 0 {
		e.t.Fatalf("baremetal %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.exit, r.stdout, r.stderr)
	}
	return r.stdout
}

func jsonOut(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("CLI output is not JSON: %v\n%s", err, out)
	}
}

// TestBaremetalCLI drives the API with the real `baremetal` client, with an
// engine that applies each verb's end state at once.
func TestBaremetalCLI(t *testing.T) {
	if _, err := os.Stat(baremetalCLI); err != nil {
		t.Skip("SKIPPING the real-client test: /usr/bin/baremetal is missing (apt-get install python3-ironicclient python3-openstackclient)")
	}
	e := newEnv(t)
	e.eng.instant = true

	var node map[string]any
	jsonOut(t, e.mustCLI("node", "create", "--driver", "fake-hardware", "--name", "cli-node",
		"--property", "cpus=4", "--property", "memory_mb=8192",
		"--driver-info", "deploy_kernel=http://127.0.0.1:8080/k", "--driver-info", "ipmi_password=hunter2", "-f", "json"), &node)
	uuid, _ := node["uuid"].(string)
	if !isUUID(uuid) || node["provision_state"] != "enroll" {
		t.Fatalf("created node %v", node)
	}
	if props := node["properties"].(map[string]any); props["cpus"] != float64(4) || props["memory_mb"] != float64(8192) {
		t.Errorf("properties %v", props)
	}
	if di := node["driver_info"].(map[string]any); di["ipmi_password"] != "******" || di["deploy_kernel"] != "http://127.0.0.1:8080/k" {
		t.Errorf("driver_info %v", di)
	}

	var port map[string]any
	jsonOut(t, e.mustCLI("port", "create", "52:54:00:AA:BB:01", "--node", uuid, "-f", "json"), &port)
	if port["address"] != "52:54:00:aa:bb:01" || port["node_uuid"] != uuid {
		t.Errorf("port %v", port)
	}

	e.mustCLI("node", "manage", "cli-node", "--wait", "30")
	e.mustCLI("node", "provide", "cli-node", "--wait", "60")
	if got := strings.TrimSpace(e.mustCLI("node", "show", "cli-node", "-f", "value", "-c", "provision_state")); got != "available" {
		t.Errorf("state after provide: %q", got)
	}

	var list []map[string]any
	jsonOut(t, e.mustCLI("node", "list", "-f", "json"), &list)
	if len(list) != 1 || list[0]["UUID"] != uuid || list[0]["Provisioning State"] != "available" {
		t.Errorf("node list %v", list)
	}
	var long []map[string]any
	jsonOut(t, e.mustCLI("node", "list", "--long", "-f", "json"), &long)
	if len(long) != 1 || long[0]["Driver"] != "fake-hardware" {
		t.Errorf("node list --long %v", long)
	}
	var ports []map[string]any
	jsonOut(t, e.mustCLI("port", "list", "--node", uuid, "-f", "json"), &ports)
	if len(ports) != 1 || ports[0]["Address"] != "52:54:00:aa:bb:01" {
		t.Errorf("port list %v", ports)
	}

	e.mustCLI("node", "set", "cli-node", "--instance-info", "image_source=http://127.0.0.1:8080/img.qcow2", "--instance-info", "root_gb=10")
	var shown map[string]any
	jsonOut(t, e.mustCLI("node", "show", "cli-node", "-f", "json"), &shown)
	ii := shown["instance_info"].(map[string]any)
	if ii["image_source"] != "http://127.0.0.1:8080/img.qcow2" || ii["root_gb"] != float64(10) {
		t.Errorf("instance_info after set %v", ii)
	}
	e.mustCLI("node", "unset", "cli-node", "--instance-info", "root_gb")
	jsonOut(t, e.mustCLI("node", "show", "cli-node", "-f", "json"), &shown)
	if _, ok := shown["instance_info"].(map[string]any)["root_gb"]; ok {
		t.Errorf("root_gb still set after unset: %v", shown["instance_info"])
	}

	var validate []map[string]any
	jsonOut(t, e.mustCLI("node", "validate", "cli-node", "-f", "json"), &validate)
	results := map[string]any{}
	for _, v := range validate {
		results[v["Interface"].(string)] = v["Result"]
	}
	if results["power"] != true || results["deploy"] != true || len(results) < 10 {
		t.Errorf("validate %v", validate)
	}

	var history []map[string]any
	jsonOut(t, e.mustCLI("node", "history", "list", "cli-node", "-f", "json"), &history)
	if len(history) != 2 {
		t.Errorf("history: %v", history)
	}

	// Errors: the CLI prints Ironic's faultstring and "(HTTP nnn)".
	errCases := []struct {
		args []string
		want string
	}{
		{[]string{"node", "show", "00000000-0000-0000-0000-000000000000"},
			"Node 00000000-0000-0000-0000-000000000000 could not be found. (HTTP 404)"},
		{[]string{"node", "provide", "cli-node"},
			`The requested action "provide" can not be performed on node "` + uuid + `" while it is in state "available". (HTTP 400)`},
		{[]string{"node", "create", "--driver", "no-such-driver"},
			`No valid host was found. Reason: No conductor service registered which supports driver no-such-driver for conductor group "". (HTTP 400)`},
		{[]string{"--os-baremetal-api-version", "1.999", "node", "list"},
			"Requested API version 1.999 is not supported by the server, client, or"},
		// One 409: the client retries it five times, 2 s apart.
		{[]string{"port", "create", "52:54:00:aa:bb:01", "--node", uuid},
			"A port with MAC address 52:54:00:aa:bb:01 already exists. (HTTP 409)"},
	}
	for _, c := range errCases {
		r := e.runCLI(c.args...)
		if r.exit == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("baremetal %s: exit %d\nstderr: %s\nwant: %s", strings.Join(c.args, " "), r.exit, r.stderr, c.want)
		}
	}

	if r := e.runCLI("node", "delete", "cli-node"); r.exit != 0 || !strings.Contains(r.stdout+r.stderr, "Deleted node cli-node") {
		t.Errorf("node delete: exit %d\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
	}
	if r := e.runCLI("node", "show", "cli-node"); r.exit == 0 || !strings.Contains(r.stderr, "could not be found") {
		t.Errorf("show after delete: exit %d %s", r.exit, r.stderr)
	}
}
