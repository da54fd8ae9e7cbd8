package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeployIPMIPXEBIOSThenRescue deploys a SeaBIOS VM behind OpenIPMI's
// ipmi_sim with the unmodified baremetal CLI: IPMI power and boot device,
// automated cleaning through the agent on provide, DHCP + TFTP + iPXE
// network boot of ironflow's agent, image streamed with its sha256
// checked, config drive written, boot from disk. The VM's own init then
// prints what it read from the config drive. ironflow dev's metrics then
// show the DHCP replies, TFTP and HTTP boot transfers, IPMI calls and the
// deploy, and pass promtool (checkDeployMetrics).
//
// Then, on the same booted VM, `baremetal node rescue --wait`: the VM
// network-boots ironflow's agent again, which sets the rescue user's
// password from the hash ironflow sends and stops, as the console's
// IRONFLOW-RESCUE marker shows; the disk is untouched. `baremetal node
// unrescue --wait` then boots the deployed disk again (its booted-from-disk
// marker a second time). The clear password is in no log of ironflow and
// no workflow history (rescueAndUnrescue).
//
// Throughout, the node's console (ipmitool-socat) is enabled with
// `baremetal node console enable`: ipmi_sim's serial over LAN reaches the
// VM's serial line (vbmc serial_address), the worker bridges `ipmitool sol
// activate` to the endpoint `baremetal node console show` names, and a
// session on it reads the agent's own console lines during the deploy;
// the node's history says where the console was while it waited in
// wait call-back, and `baremetal node console disable` ends the session
// before console show says disabled.
func TestDeployIPMIPXEBIOSThenRescue(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=true")
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-a", "52:54:00:e2:0a:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-a", "disk.raw"))
	password := newBMCPassword()
	def := agentVM(vm)
	def.SerialAddress = labSerialTCP
	startIPMISim(t, s, def, password)

	begin := time.Now()
	uuid := createIPMINode(t, s, vm, "e2e-a", password, "--deploy-interface", "direct", "--rescue-interface", "agent",
		"--console-interface", "ipmitool-socat")
	defer printNodeHistory(t, s, uuid)
	console := openConsole(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	printTimeline(t, s, uuid, "provide (automated cleaning)")
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)

	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EscenarioA e2e"
	defer printTimeline(t, s, uuid, "deploy")
	s.deploy(t, uuid, vm, "e2e-a", pubKey)
	t.Logf("deploy of e2e-a reached active %.1fs after node create", time.Since(begin).Seconds())

	// The node is active: the machine has been power-cycled onto its disk,
	// where the test image's init reads the config drive ironflow wrote.
	waitBootedFromDisk(t, vm, "e2e-a", pubKey)
	t.Logf("VM booted the deployed disk and read its config drive %.1fs after node create", time.Since(begin).Seconds())
	// What the deploy left in ironflow dev's metrics, linted by promtool.
	checkDeployMetrics(t, lab, s)

	// What the machine printed reached the console session: the agent's
	// own lines and the deployed system's marker.
	for _, want := range []string{"agent listening", "IRONFLOW-E2E booted-from-disk"} {
		if !console.has(want) {
			t.Errorf("the console session did not show %q", want)
		}
	}
	if h := s.mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event"); !strings.Contains(h, "Console of the node during wait call-back: worker") {
		t.Errorf("the history does not say where the console was in wait call-back:\n%s", h)
	}
	console.disable(t)

	rescueAndUnrescue(t, s, uuid, vm)
}
