package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestAdoptTakesOverARunningMachineThroughTheCLI: `baremetal node adopt`
// (API 1.17) on a redfish node behind ironflow's vbmc whose QEMU machine
// runs. A node whose deploy interface (ramdisk) boots the instance through
// ironflow and whose instance_info does not say what to boot fails the
// validation: adopt failed, target active, Ironic's last_error and an
// ERROR history event. Fixed, it is adopted: active, and the machine was
// never touched: the same QEMU process runs, and the vbmc carried out no
// power action, boot override or virtual media change after the machine
// was powered on. The adopted node is an ordinary active node: the power
// sync records the machine's loss of power, undeploy takes it to
// available.
func TestAdoptTakesOverARunningMachineThroughTheCLI(t *testing.T) {
	l := startBMCLab(t)
	const name = "adopt-rf"
	mustCLI(t, "node", "create", "--name", name, "--driver", "redfish", "--driver-info", "redfish_address="+l.redfishURL,
		"--driver-info", "redfish_system_id=/redfish/v1/Systems/rf0", "--driver-info", "redfish_username=admin",
		"--driver-info", "redfish_password=password", "--boot-interface", "ipxe", "--deploy-interface", "ramdisk", "--no-automated-clean")
	uuid := getNode(t, name).UUID
	mustCLI(t, "port", "create", "52:54:00:dd:00:01", "--node", uuid)
	mustCLI(t, "node", "manage", name, "--wait", "120")
	mustCLI(t, "node", "power", "on", name)
	waitFor(t, "rf0 QEMU running", 60*time.Second, func() bool { return l.qemuRunning("rf0") })
	waitFor(t, name+" power on recorded", 60*time.Second, func() bool { return deref(getNode(t, name).PowerState) == "power on" })
	pid, _ := os.ReadFile(filepath.Join(l.stateDir, "rf0", "qemu.pid"))
	mark := len(l.vbmcLog.String())

	// Validation fails: Ironic's _do_adoption wording.
	out, errOut, err := baremetal(t, "node", "adopt", name, "--wait", "60")
	if err == nil {
		t.Fatalf("adopt without kernel and ramdisk succeeded: %s %s", out, errOut)
	}
	n := getNode(t, name)
	want := "Error while attempting to adopt node " + uuid + ": Cannot validate image information for node " + uuid +
		" because one or more parameters are missing from its instance_info and insufficient information is present to boot" +
		" from a remote volume. Missing are: ['kernel', 'ramdisk']."
	if n.ProvisionState != "adopt failed" || deref(n.TargetProvisionState) != "active" || deref(n.LastError) != want {
		t.Fatalf("after a failed adoption: state %q target %q last_error %q, want adopt failed, active, %q\nCLI: %s\nworker log:\n%s",
			n.ProvisionState, deref(n.TargetProvisionState), deref(n.LastError), want, errOut, workerLog())
	}
	var hist struct {
		History []struct {
			Event     string `json:"event"`
			EventType string `json:"event_type"`
			Severity  string `json:"severity"`
		} `json:"history"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/history?detail=True", nil, &hist); code != 200 {
		t.Fatalf("history: %d", code)
	}
	found := false
	for _, h := range hist.History {
		found = found || h.Event == want && h.Severity == "ERROR" && h.EventType == "adoption"
	}
	if !found {
		t.Errorf("the node's history lacks the adoption failure as an ERROR adoption event: %+v", hist.History)
	}

	// Fixed, adopted again from adopt failed.
	mustCLI(t, "node", "set", name, "--instance-info", "kernel=http://127.0.0.1:9/vmlinuz", "--instance-info", "ramdisk=http://127.0.0.1:9/initrd")
	mustCLI(t, "node", "adopt", name, "--wait", "60")
	n = getNode(t, name)
	if n.ProvisionState != "active" || n.TargetProvisionState != nil || n.LastError != nil || deref(n.PowerState) != "power on" {
		t.Fatalf("after adoption: state %q target %q last_error %q power %q", n.ProvisionState, deref(n.TargetProvisionState), deref(n.LastError), deref(n.PowerState))
	}
	now, _ := os.ReadFile(filepath.Join(l.stateDir, "rf0", "qemu.pid"))
	if !l.qemuRunning("rf0") || string(now) != string(pid) {
		t.Fatalf("the machine did not keep running through the adoption: QEMU pid %q then %q", pid, now)
	}
	action := regexp.MustCompile(`(?i)msg="?[^"\n]*(power|restart|shutdown|boot override|media|nmi)`)
	if !action.MatchString(l.vbmcLog.String()[:mark]) {
		t.Fatalf("the vbmc's log does not show the power on before the adoptions: the check below would see nothing:\n%s", l.vbmcLog.String())
	}
	if acted := action.FindAllString(l.vbmcLog.String()[mark:], -1); len(acted) > 0 {
		t.Fatalf("the BMC was told to act during the adoptions: %q", acted)
	}

	// An ordinary active node: the power sync (every 5 s in the lab)
	// records the machine's loss of power, undeploy makes it available.
	l.killQEMU(t, "rf0")
	waitFor(t, name+" power off recorded by the power sync", 60*time.Second, func() bool { return deref(getNode(t, name).PowerState) == "power off" })
	mustCLI(t, "node", "undeploy", name, "--wait", "60")
	if n := getNode(t, name); n.ProvisionState != "available" || len(n.InstanceInfo) != 0 {
		t.Fatalf("after undeploy: state %q instance_info %v", n.ProvisionState, n.InstanceInfo)
	}
	mustCLI(t, "node", "delete", name)
}
