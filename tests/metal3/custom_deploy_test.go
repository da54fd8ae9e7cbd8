package metal3

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/tests/metal3/bmo"
)

// goldenCustomProvision is Provision for a customDeploy host without an
// image (BMO's getCustomDeployUpdateOptsForNode): no image fields patched,
// and the deploy with the method as a deploy step, priority 80 (the host
// has no network data: the config drive carries none).
var goldenCustomProvision = []want{
	hasCapacity,
	get("/v1/nodes/{node}"), provision("provide"),
	pollNode,
	patch("add /instance_uuid", "add /instance_info/capabilities", "add /instance_info/root_device",
		"add /driver_info/force_persistent_boot_device"),
	get("/v1/nodes/{node}/validate"),
	{Method: "PUT", Path: "/v1/nodes/{node}/states/provision", Body: []string{"configdrive", "deploy_steps", "target"}, Values: map[string]any{"target": "active"},
		Nested: map[string][]string{"configdrive": {"meta_data", "user_data"}}},
	pollNode,
}

// TestBMOCustomDeploy: a host with spec.customDeploy.method and no image,
// as BMO v0.13.2 provisions it: the node is created with deploy_interface
// custom-agent, validates without an image, and is deployed with the
// method as its deploy step; the simulated agent offers that step
// (SIMMACHINE_CUSTOM_STEP), runs it once, and the host ends active.
func TestBMOCustomDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stack is not started")
	}
	const mac = "52:54:00:3a:00:05"
	h := &bmo.Host{Namespace: "metal3", Name: "custom-0", UID: "6f5d6a2c-3f0b-4c1e-9d55-0a1b2c3d4e05",
		BMCAddress: "fake://metal3-custom-0", BMCUsername: "admin", BMCPassword: "password",
		BootMACAddress: mac, BootMode: "UEFI", CPUArchitecture: "x86_64", AutomatedCleaningMode: "metadata",
		CustomDeployMethod: "install_coreos", UserData: "#cloud-config\nhostname: custom-0\n"}
	c := newClient(t, h)
	c.initAndRegisterWith(mac, goldenRegisterWith(mac, []string{"deploy_interface"}, map[string]any{"driver": "fake-hardware", "deploy_interface": "custom-agent"}))
	t.Setenv("SIMMACHINE_CUSTOM_STEP", "install_coreos")
	startMachine(t, h.ProvisioningID, mac)

	c.run("prepare", time.Minute, c.prepare(bmo.PrepareData{}))
	c.check("prepare", goldenPrepare)
	if ok, err := c.p.HasCapacity(ctxFor(t, time.Minute), 20); err != nil || !ok {
		t.Fatalf("HasCapacity: %v %v", ok, err)
	}
	c.run("provision", 5*time.Minute, c.p.Provision)
	for _, call := range c.check("provision", goldenCustomProvision) {
		if call.Method == "PUT" {
			t.Logf("custom deploy: %v answered %d", call.Body, call.Status)
		}
	}
	log, _ := os.ReadFile(filepath.Join(stack.dir, "simmachine-"+h.ProvisioningID+".log"))
	if n := strings.Count(string(log), "custom deploy step install_coreos ran with args {}"); n != 1 {
		t.Fatalf("the agent ran the custom step %d times, want once:\n%s", n, log)
	}
	if ok, err := c.p.HasCapacity(ctxFor(t, time.Minute), 20); err != nil || !ok {
		t.Fatalf("HasCapacity: %v %v", ok, err)
	}
	c.run("deprovision", 5*time.Minute, c.p.Deprovision)
	c.check("deprovision", goldenDeprovision)
}
