package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func createNode(t *testing.T, body map[string]any, mac string) string {
	t.Helper()
	var n node
	if code, _ := call(t, "POST", "/v1/nodes", body, &n); code != 201 {
		t.Fatalf("create node %v: %d", body["name"], code)
	}
	if mac != "" {
		if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": n.UUID}, nil); code != 201 {
			t.Fatalf("create port: %d", code)
		}
	}
	return n.UUID
}

func moveTo(t *testing.T, uuid string, steps ...[2]string) {
	t.Helper()
	for _, s := range steps {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s[0]}, nil); code != 202 {
			t.Fatalf("%s: %d", s[0], code)
		}
		waitState(t, uuid, s[1], 90*time.Second)
	}
}

// TestRamdiskDeployKeepsTheBootConfiguration: deploy_interface ramdisk goes
// active with the instance's own kernel and ramdisk served to the machine,
// writes nothing, and undeploy removes the boot configuration.
func TestRamdiskDeployKeepsTheBootConfiguration(t *testing.T) {
	uuid := createNode(t, map[string]any{"name": "ramdisk-node-0", "driver": "fake-hardware", "deploy_interface": "ramdisk", "automated_clean": false}, "52:54:00:ee:00:01")
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/kernel", "value": "http://images.example/vmlinuz"},
		{"op": "add", "path": "/instance_info/ramdisk", "value": "http://images.example/initrd"},
		{"op": "add", "path": "/instance_info/ramdisk_kernel_arguments", "value": "console=ttyS0 live=1"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	mustCLI(t, "node", "deploy", uuid, "--wait", "60")
	st := openStore(t)
	bc, err := st.GetBootConfig(context.Background(), uuid)
	if err != nil {
		t.Fatalf("no boot configuration while active: %v", err)
	}
	if bc.Kind != "ramdisk" || bc.KernelURL != "http://images.example/vmlinuz" || bc.KernelParams != "console=ttyS0 live=1" {
		t.Fatalf("boot configuration %+v", bc)
	}
	mustCLI(t, "node", "undeploy", uuid, "--wait", "60")
	if _, err := st.GetBootConfig(context.Background(), uuid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("boot configuration left after undeploy: %v", err)
	}
}

// TestAnacondaDeployFollowsTheKickstartsHeartbeats plays the installer: it
// reads the kickstart ironflow serves the machine and posts its %pre and
// %post heartbeats with the token inside; the node goes active. A second
// deploy whose installer reports an error ends in deploy failed with the
// installer's message.
func TestAnacondaDeployFollowsTheKickstartsHeartbeats(t *testing.T) {
	uuid := createNode(t, map[string]any{"name": "anaconda-node-0", "driver": "fake-hardware", "deploy_interface": "anaconda", "automated_clean": false}, "52:54:00:ee:00:02")
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/kernel", "value": "http://images.example/anaconda/vmlinuz"},
		{"op": "add", "path": "/instance_info/ramdisk", "value": "http://images.example/anaconda/initrd.img"},
		{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/rootfs.tar"},
		{"op": "add", "path": "/instance_info/stage2", "value": "http://images.example/anaconda/stage2"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})

	installer := func(status, message string) {
		t.Helper()
		st := openStore(t)
		bc, err := st.GetBootConfig(context.Background(), uuid)
		if err != nil {
			t.Fatalf("no boot configuration for the installer: %v", err)
		}
		if !strings.Contains(bc.KernelParams, "inst.ks=") || !strings.Contains(bc.KernelParams, "inst.stage2=http://images.example/anaconda/stage2") {
			t.Fatalf("installer command line %q", bc.KernelParams)
		}
		if !strings.Contains(bc.Kickstart, "liveimg --url=http://images.example/rootfs.tar") {
			t.Fatalf("kickstart does not install the image:\n%s", bc.Kickstart)
		}
		m := regexp.MustCompile(`"agent_token": *"([A-Za-z0-9_-]{43})"`).FindStringSubmatch(bc.Kickstart)
		if m == nil {
			t.Fatalf("no agent token in the kickstart")
		}
		for _, s := range []string{"start", status} {
			body, _ := json.Marshal(map[string]any{"callback_url": "", "agent_token": m[1], "agent_version": "anaconda",
				"agent_status": s, "agent_status_message": message})
			req, _ := http.NewRequest("POST", lab.APIURL+"/v1/heartbeat/"+uuid, bytes.NewReader(body))
			req.Header.Set("X-OpenStack-Ironic-API-Version", "1.72")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 202 {
				t.Fatalf("installer heartbeat %s: HTTP %d", s, resp.StatusCode)
			}
		}
	}

	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy: %d", code)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	installer("end", "Deployment completed successfully.")
	waitState(t, uuid, "active", 60*time.Second)

	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "rebuild"}, nil); code != 202 {
		t.Fatalf("rebuild: %d", code)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	installer("error", "Error: no space left on device /dev/vda")
	n := waitState(t, uuid, "deploy failed", 60*time.Second)
	if !strings.Contains(deref(n.LastError), "no space left on device /dev/vda") {
		t.Fatalf("last_error %q does not carry the installer's message", deref(n.LastError))
	}
}

// TestInspectWithTheAgent: inspection boots the (simulated) agent, stores
// its inventory, fills in properties and creates the ports it found.
func TestInspectWithTheAgent(t *testing.T) {
	uuid := createNode(t, map[string]any{"name": "inspect-node-0", "driver": "fake-hardware", "deploy_interface": "direct", "inspect_interface": "agent"}, "52:54:00:ee:00:03")
	startSimMachine(t, uuid, []string{"52:54:00:ee:00:03", "52:54:00:ee:00:04"}, sim.Config{DiskSize: 40 << 30})
	moveTo(t, uuid, [2]string{"manage", "manageable"})
	mustCLI(t, "node", "inspect", uuid, "--wait", "90")
	var full struct {
		ProvisionState string         `json:"provision_state"`
		Properties     map[string]any `json:"properties"`
		InspectedAt    *string        `json:"inspection_finished_at"`
	}
	call(t, "GET", "/v1/nodes/"+uuid, nil, &full)
	if full.ProvisionState != "manageable" || full.InspectedAt == nil {
		t.Fatalf("after inspect: %+v", full)
	}
	if full.Properties["local_gb"] != float64(39) || full.Properties["cpus"] == nil || full.Properties["memory_mb"] == nil {
		t.Fatalf("properties not filled from the inventory: %v", full.Properties)
	}
	var ports struct {
		Ports []struct {
			Address string `json:"address"`
		} `json:"ports"`
	}
	call(t, "GET", "/v1/ports?node="+uuid, nil, &ports)
	if len(ports.Ports) != 2 {
		t.Fatalf("ports after inspection: %+v (the second MAC should have been added)", ports.Ports)
	}
	var inv map[string]any
	req, _ := http.NewRequest("GET", lab.APIURL+"/v1/nodes/"+uuid+"/inventory", nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.81")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil || inv["inventory"] == nil {
		t.Fatalf("GET inventory: %v %v", err, inv)
	}
	fmt.Println("inspected properties:", full.Properties)
}
