package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
)

// firmwareImages serves firmware image files by name (their bytes are
// the name) for the worker's checksum verification; the vbmc takes the
// version from the file name and fetches nothing.
func firmwareImages(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("firmware image " + r.URL.Path))
	}))
	t.Cleanup(s.Close)
	return s
}

func firmwareImageSHA256(path string) string {
	sum := sha256.Sum256([]byte("firmware image " + path))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// enrollFirmwareAgentNode creates a redfish node on the vbmc with the
// redfish firmware interface that deploys through the (simulated) agent,
// and makes it available: manage, then automated cleaning on the agent.
func enrollFirmwareAgentNode(t *testing.T, name, bmcURL, vm, mac string, img *imageServer) (string, *simMachine) {
	t.Helper()
	var n node
	code, _ := callAt(t, lab.APIURL, "1.86", "POST", "/v1/nodes", map[string]any{
		"name": name, "driver": "redfish", "firmware_interface": "redfish", "deploy_interface": "direct", "boot_interface": "ipxe",
		"properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
		"driver_info": map[string]any{"redfish_address": bmcURL, "redfish_username": "admin", "redfish_password": "password",
			"redfish_system_id": vm, "firmware_update_poll_interval": 1},
	}, &n)
	if code != 201 {
		t.Fatalf("create node %s: %d", name, code)
	}
	if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": n.UUID}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+n.UUID, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": img.URL + "/disk.raw"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": img.sha256},
	}, nil); code != 200 {
		t.Fatalf("set instance_info: %d", code)
	}
	m := startSimMachine(t, n.UUID, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", n.UUID, "--wait", "60")
	mustCLI(t, "node", "provide", n.UUID, "--wait", "180")
	return n.UUID, m
}

func firmwareUpdateStep(url, checksum string, priority int) map[string]any {
	return map[string]any{"interface": "firmware", "step": "update", "priority": priority,
		"args": map[string]any{"settings": []map[string]any{{"component": "bios", "url": url, "checksum": checksum}}}}
}

// deployOrder lists, in the order the deploy's history scheduled them, the
// firmware update's start and the agent steps.
func deployOrder(t *testing.T, uuid string) []string {
	t.Helper()
	order := []string{}
	historyCount(t, temporalClient(t), uuid, func(et enumspb.EventType, s string) bool {
		if et != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return false
		}
		switch {
		case strings.Contains(s, "StartFirmwareUpdate"):
			order = append(order, "firmware.update")
		case strings.Contains(s, "RunAgentStep"):
			order = append(order, "agent")
		}
		return false
	})
	return order
}

// checkFlashedBeforeAgent: the deploy reached active, the BIOS shows the
// image's version as flashed, and the update ran before any agent step.
func checkFlashedBeforeAgent(t *testing.T, uuid, version string) {
	t.Helper()
	n := waitState(t, uuid, "active", 180*time.Second)
	if n.LastError != nil {
		t.Fatalf("last_error %q", *n.LastError)
	}
	bios := nodeFirmware(t, uuid)["bios"]
	if bios.InitialVersion != "ironflow-vbmc-bios-1.0" || bios.CurrentVersion != version || bios.LastVersionFlashed == nil || *bios.LastVersionFlashed != version {
		t.Fatalf("bios after the deploy: %+v", bios)
	}
	order := deployOrder(t, uuid)
	if len(order) < 2 || order[0] != "firmware.update" || !contains(order, "agent") {
		t.Fatalf("deploy history, in order: %v; want the firmware update before the agent's steps", order)
	}
	t.Logf("deploy of %s: bios %s (flashed %s), history order %v", uuid, bios.CurrentVersion, *bios.LastVersionFlashed, order)
}

// TestFirmwareUpdateAsDeployStep: a deploy whose deploy_steps name
// firmware.update at priority 110 (above deploy.deploy's 100) flashes the
// BIOS through the vbmc's UpdateService, after the worker verified the
// image's checksum, before the agent boots; the deploy ends active and
// GET /v1/nodes/{id}/firmware shows the new version.
func TestFirmwareUpdateAsDeployStep(t *testing.T) {
	const vm, mac = "fwdeploy0", "52:54:00:f7:d3:01"
	images := firmwareImages(t)
	bmcURL := startFirmwareBMC(t, vm, 1)
	uuid, _ := enrollFirmwareAgentNode(t, "firmware-deploy-0", bmcURL, vm, mac, newImageServer(t, 8<<20))

	url := images.URL + "/bios-4.2.bin"
	code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "active", "deploy_steps": []map[string]any{firmwareUpdateStep(url, firmwareImageSHA256("/bios-4.2.bin"), 110)}}, nil)
	if code != 202 {
		t.Fatalf("deploy with firmware.update: %d", code)
	}
	checkFlashedBeforeAgent(t, uuid, "bios-4.2")
}

// TestFirmwareUpdateThroughDeployTemplate: the same step in a deploy
// template, matched by a trait the node has and its instance_info/traits
// asks for.
func TestFirmwareUpdateThroughDeployTemplate(t *testing.T) {
	const vm, mac, trait = "fwdeploy1", "52:54:00:f7:d3:02", "CUSTOM_FWDEPLOY_BIOS"
	images := firmwareImages(t)
	bmcURL := startFirmwareBMC(t, vm, 1)
	uuid, _ := enrollFirmwareAgentNode(t, "firmware-deploy-1", bmcURL, vm, mac, newImageServer(t, 8<<20))

	url := images.URL + "/bios-4.3.bin"
	var tmpl struct {
		UUID string `json:"uuid"`
	}
	code, _ := callAt(t, lab.APIURL, "1.86", "POST", "/v1/deploy_templates", map[string]any{
		"name": trait, "steps": []map[string]any{firmwareUpdateStep(url, firmwareImageSHA256("/bios-4.3.bin"), 110)}}, &tmpl)
	if code != 201 {
		t.Fatalf("create deploy template: %d", code)
	}
	t.Cleanup(func() { callAt(t, lab.APIURL, "1.86", "DELETE", "/v1/deploy_templates/"+tmpl.UUID, nil, nil) })
	if code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/traits/"+trait, nil, nil); code != 204 {
		t.Fatalf("add trait: %d", code)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/traits", "value": []string{trait}},
	}, nil); code != 200 {
		t.Fatalf("set instance_info/traits: %d", code)
	}
	if code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy: %d", code)
	}
	checkFlashedBeforeAgent(t, uuid, "bios-4.3")
}

// TestFirmwareUpdateDeployStepBadChecksum: an image that does not hash to
// the step's checksum fails the deploy before the BMC is asked to flash
// it: deploy failed, a last_error naming the step, the component and
// the mismatch, the BIOS unchanged. The operator's retry with the right
// checksum then deploys.
func TestFirmwareUpdateDeployStepBadChecksum(t *testing.T) {
	const vm, mac = "fwdeploy2", "52:54:00:f7:d3:03"
	images := firmwareImages(t)
	bmcURL := startFirmwareBMC(t, vm, 1)
	uuid, _ := enrollFirmwareAgentNode(t, "firmware-deploy-2", bmcURL, vm, mac, newImageServer(t, 8<<20))

	// The file name does not name the component: the message must.
	url := images.URL + "/uefi-4.4.bin"
	bad := firmwareImageSHA256("/some-other-image.bin")
	code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "active", "deploy_steps": []map[string]any{firmwareUpdateStep(url, bad, 110)}}, nil)
	if code != 202 {
		t.Fatalf("deploy with firmware.update: %d", code)
	}
	n := waitState(t, uuid, "deploy failed", 120*time.Second)
	msg := deref(n.LastError)
	for _, want := range []string{"firmware.update", "firmware update of bios: ", "checksums do not match", strings.TrimPrefix(bad, "sha256:")} {
		if !strings.Contains(msg, want) {
			t.Fatalf("last_error %q lacks %q", msg, want)
		}
	}
	t.Logf("last_error: %s", msg)
	if bios := nodeFirmware(t, uuid)["bios"]; bios.CurrentVersion != "ironflow-vbmc-bios-1.0" || bios.LastVersionFlashed != nil {
		t.Fatalf("bios after a failed checksum: %+v", bios)
	}
	if order := deployOrder(t, uuid); contains(order, "agent") {
		t.Fatalf("the agent ran after the firmware step failed: %v", order)
	}

	// Retry from deploy failed, with the image's checksum.
	code, _ = callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "active", "deploy_steps": []map[string]any{firmwareUpdateStep(url, firmwareImageSHA256("/uefi-4.4.bin"), 110)}}, nil)
	if code != 202 {
		t.Fatalf("redeploy from deploy failed: %d", code)
	}
	checkFlashedBeforeAgent(t, uuid, "uefi-4.4")
}

// vbmcBIOSVersion reads the VM's BIOS version from the vbmc's firmware
// inventory, as the BMC reports it.
func vbmcBIOSVersion(bmcURL, vm string) string {
	req, err := http.NewRequest("GET", bmcURL+"/redfish/v1/UpdateService/FirmwareInventory/"+vm+"-BIOS", nil)
	if err != nil {
		return ""
	}
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var inv struct{ Version string }
	_ = json.NewDecoder(resp.Body).Decode(&inv)
	return inv.Version
}

// TestFirmwareUpdateDeployStepUnderTheAgent: at priority 90, below
// deploy.deploy's 100, the update runs after the agent called back, on a
// VM that runs: the vbmc applies the BIOS at the host's reset, so the step
// reboots the node into the agent and the deploy goes on only after the
// new agent's call-back, then writes the image. The simulated agent cannot
// see the vbmc's reset of the VM, so the test plays the machine: when the
// BMC reports the new version (applied at the reset) the agent that ran
// before it goes down (its standby.power_off), and the simulated machine
// boots a new one.
func TestFirmwareUpdateDeployStepUnderTheAgent(t *testing.T) {
	const vm, mac = "fwdeploy3", "52:54:00:f7:d3:04"
	images := firmwareImages(t)
	bmcURL := startFirmwareBMC(t, vm, 1)
	uuid, m := enrollFirmwareAgentNode(t, "firmware-deploy-3", bmcURL, vm, mac, newImageServer(t, 8<<20))
	bootsBefore := m.boots()

	ctx, cancel := context.WithCancel(context.Background())
	reset := make(chan struct{})
	go func() {
		defer close(reset)
		for ctx.Err() == nil {
			if vbmcBIOSVersion(bmcURL, vm) == "bios-4.5" {
				// The reset ends the ramdisk the agent ran in: the
				// simulated agent goes down as at a power-off.
				if a := m.current(); a != nil && a.PoweredOn() {
					if c, err := a.Client(); err == nil {
						_ = c.PowerOff(ctx)
					}
					for a.PoweredOn() && ctx.Err() == nil {
						time.Sleep(50 * time.Millisecond)
					}
					t.Logf("BIOS bios-4.5 applied at the host's reset: the agent before it went down (%d boots)", m.boots())
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-reset })

	url := images.URL + "/bios-4.5.bin"
	code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "active", "deploy_steps": []map[string]any{firmwareUpdateStep(url, firmwareImageSHA256("/bios-4.5.bin"), 90)}}, nil)
	if code != 202 {
		t.Fatalf("deploy with firmware.update: %d", code)
	}
	n := waitState(t, uuid, "active", 180*time.Second)
	if n.LastError != nil {
		t.Fatalf("last_error %q", *n.LastError)
	}
	bios := nodeFirmware(t, uuid)["bios"]
	if bios.CurrentVersion != "bios-4.5" || bios.LastVersionFlashed == nil || *bios.LastVersionFlashed != "bios-4.5" {
		t.Fatalf("bios after the deploy: %+v", bios)
	}
	// deploy.deploy booted one agent, the firmware's reset another.
	if got := m.boots() - bootsBefore; got != 2 {
		t.Fatalf("the deploy booted the agent %d times, want 2 (deploy.deploy, the firmware's reset)", got)
	}
	// The update ran after the agent called back and before the image
	// was written (write_image at 80).
	order := []string{}
	historyCount(t, temporalClient(t), uuid, func(et enumspb.EventType, s string) bool {
		if et != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return false
		}
		switch {
		case strings.Contains(s, "StartFirmwareUpdate"):
			order = append(order, "firmware.update")
		case strings.Contains(s, "RunAgentStep") && strings.Contains(s, "write_image"):
			order = append(order, "write_image")
		}
		return false
	})
	if len(order) != 2 || order[0] != "firmware.update" || order[1] != "write_image" {
		t.Fatalf("deploy history, in order: %v; want firmware.update, then write_image", order)
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "reboots the node") {
		t.Fatalf("the node's history does not show the step's reboot into the agent:\n%s", hist)
	}
	t.Logf("deploy of %s with firmware.update at 90: bios %s, %d agent boots, history order %v", uuid, bios.CurrentVersion, m.boots()-bootsBefore, order)
}
