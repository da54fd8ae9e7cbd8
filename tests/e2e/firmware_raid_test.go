package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/vbmc"
)

// Out-of-band firmware and RAID steps on VMs behind `ironflow vbmc serve`
// (its UpdateService and Storage), with ironflow run as production runs
// it (startSplitStack), so that the worker can die in the middle of a step.

const (
	// fwUpdateSeconds is how long the vbmc's update task flashes: longer
	// than the worker lives (killed right after the task starts).
	fwUpdateSeconds = 40
	// fwStepWait bounds the cleaning once the worker is back.
	fwStepWait = 4 * time.Minute
)

// startUpdateBMC serves Redfish for vm inside the lab with update tasks of
// updateSeconds.
func startUpdateBMC(t *testing.T, s *stack, updateSeconds float64, vm vbmc.VM) *vbmcServer {
	t.Helper()
	v := &vbmcServer{password: newBMCPassword(), stateDir: filepath.Join(s.lab.Dir, "vbmc-redfish")}
	path := filepath.Join(s.lab.Dir, "vbmc-redfish.json")
	writeVBMCConfig(t, path, vbmc.Config{StateDir: v.stateDir, Username: "admin", Password: v.password,
		MediaNetworks: []string{LabNetwork}, Accel: vbmcAccel(), UpdateSeconds: updateSeconds, VMs: []vbmc.VM{vm}})
	v.proc = s.lab.Start("vbmc-redfish", nil, s.bin, "vbmc", "serve", "--config", path, "--listen", redfishListen)
	s.procs = append(s.procs, v.proc)
	s.waitHTTP(t, "http://"+redfishListen+"/redfish/v1", v.proc)
	return v
}

// apiJSON is biosAPI decoding the answer into out (when not nil), failing
// the test on a status other than want.
func apiJSON(t *testing.T, s *stack, method, path string, body any, want int, out any) {
	t.Helper()
	code, b := biosAPI(t, s, method, path, "1.86", body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %s\n%s", method, path, code, want, b, s.logTail())
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type e2eNode struct {
	UUID               string         `json:"uuid"`
	ProvisionState     string         `json:"provision_state"`
	PowerState         *string        `json:"power_state"`
	LastError          *string        `json:"last_error"`
	CleanStep          map[string]any `json:"clean_step"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
	Properties         map[string]any `json:"properties"`
	RAIDConfig         map[string]any `json:"raid_config"`
}

func getNode(t *testing.T, s *stack, uuid string) e2eNode {
	t.Helper()
	var n e2eNode
	apiJSON(t, s, "GET", "/v1/nodes/"+uuid, nil, 200, &n)
	return n
}

// waitNode polls the node until ok says yes, failing after limit.
func waitNode(t *testing.T, s *stack, uuid, what string, limit time.Duration, ok func(e2eNode) bool) e2eNode {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		n := getNode(t, s, uuid)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			le := ""
			if n.LastError != nil {
				le = *n.LastError
			}
			t.Fatalf("node %s: %s not seen within %s: provision_state %s, last_error %q\n%s", uuid, what, limit, n.ProvisionState, le, s.logTail())
		}
		time.Sleep(time.Second)
	}
}

// bmcTask reads the vbmc's task at uri.
func bmcTask(t *testing.T, s *stack, v *vbmcServer, uri string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+redfishListen+uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", v.password)
	resp, err := labHTTPClient(s.lab).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", uri, err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return doc
}

// TestFirmwareUpdateOutlivesTheWorkerOnVM: a running SeaBIOS VM behind
// `ironflow vbmc serve` gets a BIOS image in manual cleaning
// (firmware.update, disable_ramdisk, the image's SHA-256 checked by the
// worker). The worker is killed as soon as the BMC's task runs; the task
// flashes for longer than the worker is gone, and since the VM runs, the
// BMC then waits for the host's reset (ResetRequired). The worker started
// again resumes the step's timer loop, reboots the node, the vbmc applies
// the image at the reset, and the node is manageable with the new version
// in GET /v1/nodes/{id}/firmware.
func TestFirmwareUpdateOutlivesTheWorkerOnVM(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startSplitStack(t, lab, splitStackConfig{})
	vm := lab.AddVM("node-fwup", "52:54:00:e2:f7:31", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-fwup", "disk.raw"))
	bmc := startUpdateBMC(t, s, fwUpdateSeconds, vmDefinition(vm, 1, DefaultMemoryMB, vmDiskSize))

	image := filepath.Join(lab.Dir, "bios-2.7.bin")
	if err := os.WriteFile(image, []byte("ironflow e2e BIOS image 2.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("ironflow e2e BIOS image 2.7\n"))
	imageURL := s.publishImage(t, image, "bios-2.7.bin")

	var created e2eNode
	apiJSON(t, s, "POST", "/v1/nodes", map[string]any{
		"name": "node-fwup", "driver": "redfish", "firmware_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": "http://" + redfishListen, "redfish_system_id": "/redfish/v1/Systems/" + vm.Name,
			"redfish_username": "admin", "redfish_password": bmc.password, "firmware_update_poll_interval": 2},
		"properties": map[string]any{"capabilities": "boot_mode:" + vm.Firmware},
	}, 201, &created)
	uuid := created.UUID
	defer printNodeHistory(t, s, uuid)
	apiJSON(t, s, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "manage"}, 202, nil)
	waitNode(t, s, uuid, "manageable", manageWait, func(n e2eNode) bool { return n.ProvisionState == "manageable" })
	apiJSON(t, s, "PUT", "/v1/nodes/"+uuid+"/states/power", map[string]any{"target": "power on"}, 202, nil)
	waitNode(t, s, uuid, "power on", time.Minute, func(n e2eNode) bool { return n.PowerState != nil && *n.PowerState == "power on" })

	apiJSON(t, s, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "disable_ramdisk": true,
		"clean_steps": []any{map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{
			"settings": []any{map[string]any{"component": "bios", "url": imageURL, "checksum": "sha256:" + hex.EncodeToString(sum[:])}}}}},
	}, 202, nil)
	n := waitNode(t, s, uuid, "the BMC's update task", time.Minute, func(n e2eNode) bool {
		c, _ := n.DriverInternalInfo["firmware_update_call"].(map[string]any)
		task, _ := c["task"].(string)
		return task != "" || n.ProvisionState == "clean failed"
	})
	if n.ProvisionState != "cleaning" && n.ProvisionState != "clean wait" {
		t.Fatalf("after the update started: %s, last_error %v", n.ProvisionState, deref(n.LastError))
	}
	taskURI := n.DriverInternalInfo["firmware_update_call"].(map[string]any)["task"].(string)
	taskURI = strings.TrimSuffix(taskURI, "/Monitor")
	s.killWorker(t)
	killedAt := time.Now()

	// The flash ends while no worker runs; the BMC then waits for the
	// host's reset, and the old version stays.
	time.Sleep(fwUpdateSeconds*time.Second + 5*time.Second)
	task := bmcTask(t, s, bmc, taskURI)
	msgs, _ := json.Marshal(task["Messages"])
	if task["TaskState"] != "Running" || !strings.Contains(string(msgs), "ResetRequired") {
		t.Fatalf("task %s with the worker down: %v", taskURI, task)
	}
	var fw struct {
		Firmware []struct {
			Component          string  `json:"component"`
			InitialVersion     string  `json:"initial_version"`
			CurrentVersion     string  `json:"current_version"`
			LastVersionFlashed *string `json:"last_version_flashed"`
		} `json:"firmware"`
	}
	apiJSON(t, s, "GET", "/v1/nodes/"+uuid+"/firmware", nil, 200, &fw)
	for _, c := range fw.Firmware {
		if c.Component == "bios" && c.CurrentVersion != "ironflow-vbmc-bios-1.0" {
			t.Fatalf("bios %s before the reset", c.CurrentVersion)
		}
	}

	s.startWorker(t)
	n = waitNode(t, s, uuid, "manageable after the update", fwStepWait, func(n e2eNode) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "clean failed"
	})
	if n.ProvisionState != "manageable" || n.LastError != nil {
		t.Fatalf("cleaning ended %s, last_error %v", n.ProvisionState, deref(n.LastError))
	}
	apiJSON(t, s, "GET", "/v1/nodes/"+uuid+"/firmware", nil, 200, &fw)
	var bios string
	for _, c := range fw.Firmware {
		if c.Component == "bios" {
			bios = c.CurrentVersion
			if c.InitialVersion != "ironflow-vbmc-bios-1.0" || c.LastVersionFlashed == nil {
				t.Fatalf("bios component %+v", c)
			}
		}
	}
	if bios != "bios-2.7" {
		t.Fatalf("bios version after the update %q, want bios-2.7 (firmware %+v)", bios, fw.Firmware)
	}
	if task := bmcTask(t, s, bmc, taskURI); task["TaskState"] != "Completed" {
		t.Fatalf("task %s after the reset: %v", taskURI, task)
	}
	if !strings.Contains(readFile(bmc.proc.Log), "firmware applied at reset") {
		t.Fatalf("the vbmc applied no firmware at a reset:\n%s", readFile(bmc.proc.Log))
	}
	t.Logf("firmware update across a worker kill: %.0fs in all, %.0fs from the kill to manageable",
		time.Since(begin).Seconds(), time.Since(killedAt).Seconds())
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestRAIDVolumeIsTheRootDeviceOfTheDeployOnVM: a SeaBIOS VM with two
// drives behind `ironflow vbmc serve` gets a RAID-1 volume over both from
// manual cleaning's raid.create_configuration (the redfish raid
// interface, no agent); the node's properties.root_device becomes the
// volume's WWN, as Ironic's update_raid_info sets it. At the deploy's
// power on the vbmc attaches the volume as one SCSI disk in place of the
// drives; the agent writes the image onto the disk the hint names, and
// the VM boots the image from it.
func TestRAIDVolumeIsTheRootDeviceOfTheDeployOnVM(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-raid1", "52:54:00:e2:f7:42", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-raid1", "disk.raw"))
	def := agentVM(vm)
	def.Drives = []string{filepath.Join(lab.Dir, "vm-node-raid1", "d1.raw")}
	for _, p := range []string{def.Disk, def.Drives[0]} {
		// Sparse drives of the same size: the volume is as large as they are.
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 5<<30); err != nil {
			t.Fatal(err)
		}
	}
	bmc := startRedfishBMC(t, s, def)
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "ipxe", "--raid-interface", "redfish", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	target := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "volume_name": "root"}}}
	if code, b := biosAPI(t, s, "PUT", "/v1/nodes/"+uuid+"/states/raid", "1.12", target); code != 204 {
		t.Fatalf("PUT states/raid: %d %s", code, b)
	}
	apiJSON(t, s, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "disable_ramdisk": true, "clean_steps": []any{map[string]any{"interface": "raid", "step": "create_configuration"}},
	}, 202, nil)
	n := waitNode(t, s, uuid, "manageable after create_configuration", manageWait, func(n e2eNode) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "clean failed"
	})
	if n.ProvisionState != "manageable" {
		t.Fatalf("RAID cleaning ended %s: %s", n.ProvisionState, deref(n.LastError))
	}
	hint, _ := n.Properties["root_device"].(map[string]any)
	wwn, _ := hint["wwn"].(string)
	if !strings.HasPrefix(wwn, "0x5") || len(wwn) != 18 {
		t.Fatalf("properties.root_device %v after the RAID-1 (raid_config %v)", n.Properties["root_device"], n.RAIDConfig)
	}
	t.Logf("RAID-1 volume created; root device hint %v, properties %v", hint, n.Properties)

	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EraidRootVolume e2e"
	s.deploy(t, uuid, vm, "e2e-raid1", pubKey)
	waitBootedFromDisk(t, vm, "e2e-raid1", pubKey)

	// The image went onto the volume's disk, not onto the drives.
	img := filepath.Join(bmc.stateDir, vm.Name, "volume-1.qcow2")
	st, err := os.Stat(img)
	if err != nil || st.Size() < 1<<20 {
		t.Fatalf("the volume's image %s after the deploy: %v (size %d)", img, err, sizeOf(st))
	}
	if used := allocated(t, def.Disk) + allocated(t, def.Drives[0]); used != 0 {
		t.Fatalf("the member drives have %d bytes allocated: the deploy wrote to them, not to the volume", used)
	}
	serial := readFile(vm.SerialLog)
	if !strings.Contains(serial, "config-drive=/dev/sd") {
		t.Fatalf("the instance did not read its config drive from the SCSI disk:\n%s", tailString(serial, 3000))
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}

// allocated is the bytes the file's blocks take on disk.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
