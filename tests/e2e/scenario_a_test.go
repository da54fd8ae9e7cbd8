package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scenario timeouts, on a loaded 2-core machine under TCG (measured:
// PXE → agent → image → disk boot 22–32 s per VM).
const (
	manageWait  = 2 * time.Minute
	provideWait = 5 * time.Minute
	deployWait  = 10 * time.Minute
)

// TestE2E_A_IPMI_PXE_BIOS deploys a SeaBIOS VM behind OpenIPMI's ipmi_sim
// with the unmodified baremetal CLI: IPMI power and boot device, automated
// cleaning through the agent on provide, DHCP + TFTP + iPXE network boot of
// ironflow's agent, image streamed with its
// sha256 checked, config drive written, boot from disk. The VM's own init
// then prints what it read from the config drive.
func TestE2E_A_IPMI_PXE_BIOS(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=true")
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-a", "52:54:00:e2:0a:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-a", "disk.raw"))
	var pw [8]byte
	_, _ = rand.Read(pw[:])
	password := hex.EncodeToString(pw[:])
	startIPMISim(t, s, vm, password)

	begin := time.Now()
	uuid := strings.TrimSpace(s.mustCLI(t, "node", "create", "--name", "e2e-a", "--driver", "ipmi",
		"--deploy-interface", "direct", "--boot-interface", "ipxe",
		"--driver-info", "ipmi_address=127.0.0.1",
		"--driver-info", "ipmi_port="+strings.Split(ipmiSimListen, ":")[1],
		"--driver-info", "ipmi_username=admin",
		"--driver-info", "ipmi_password="+password,
		"--property", "capabilities=boot_mode:bios",
		"-f", "value", "-c", "uuid"))
	t.Logf("node e2e-a is %s", uuid)
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "port", "create", vm.MAC, "--node", uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	printTimeline(t, s, uuid, "provide (automated cleaning)")
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)

	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EscenarioA e2e"
	cd, err := json.Marshal(map[string]any{"meta_data": map[string]any{
		"hostname": "e2e-a", "public_keys": map[string]string{"0": pubKey}}})
	if err != nil {
		t.Fatal(err)
	}
	defer printTimeline(t, s, uuid, "deploy")
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", string(cd), "--wait", seconds(deployWait)); err != nil {
		show, _ := s.baremetal(t, "node", "show", uuid, "-f", "json", "-c", "provision_state", "-c", "last_error", "-c", "driver_internal_info")
		t.Fatalf("%v\nnode: %s\n%s\nVM console tail:\n%s", err, show, s.logTail(), Tail(vm.SerialLog, 3000))
	}
	t.Logf("deploy of e2e-a reached active %.1fs after node create", time.Since(begin).Seconds())

	// The node is active: the machine has been power-cycled onto its disk,
	// where the test image's init reads the config drive ironflow wrote.
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	want := "IRONFLOW-E2E hostname=e2e-a key=" + pubKey
	if _, err := WaitSerial(ctx, vm.SerialLog, want, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios"); !ok {
		t.Errorf("no booted-from-disk marker on the console")
	}
	t.Logf("VM booted the deployed disk and read its config drive %.1fs after node create", time.Since(begin).Seconds())
}

// seconds is d as the CLI's --wait wants it.
func seconds(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) }
