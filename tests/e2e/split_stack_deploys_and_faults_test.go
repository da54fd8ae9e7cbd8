package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// Settings of the separate-process stack. Agents heartbeat every 0.3–0.6
// of the ramdisk heartbeat timeout, so a lost agent shows within
// agentHeartbeatTimeout.
const (
	agentHeartbeatTimeout = 30 * time.Second
	// lostAgentSlack bounds, beyond agentHeartbeatTimeout, how long the
	// workflow may take to notice a silent agent and record the failure.
	lostAgentSlack = 90 * time.Second
	// statePollInterval is how often a scenario reads the node's state.
	statePollInterval = time.Second
	// seaBIOSBanner starts every SeaBIOS boot on the serial console: one
	// per power-on or reset.
	seaBIOSBanner = "SeaBIOS (version"
)

// TestSplitStackDeploysAndFaults runs ironflow as production does (api,
// worker and pxe as separate processes, PostgreSQL and Temporal apart) for
// two SeaBIOS VMs behind `ironflow vbmc serve` (Redfish, iPXE network
// boot), and the scenarios that need that, as subtests in order:
//
// G: both VMs deployed at once reach active and boot their disks.
// D: a wrong checksum fails the deploy with a last_error naming it; the
// operator fixes instance_info and signals retry.
// E: during that retried write the worker is killed with SIGKILL and
// started again; the deploy still reaches active without a second
// power-on or image download.
// F: the other VM is switched off behind ironflow's back while its agent
// writes; the deploy fails after the heartbeat timeout with a clear error,
// its boot configuration is removed and the node is off.
func TestSplitStackDeploysAndFaults(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startSplitStack(t, lab, splitStackConfig{
		API: []string{"--ramdisk-heartbeat-timeout", agentHeartbeatTimeout.String()},
		Worker: []string{"--agent-heartbeat-timeout", agentHeartbeatTimeout.String(),
			"--automated-clean=false", "--deploy-callback-timeout", "5m", "--operator-wait-timeout", "10m",
			"--sync-power-state-interval", "0"},
	})
	img, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	images := serveImage(t, lab, img, "e2e-test.img")
	vms := []*LabVM{
		lab.AddVM("node-g1", "52:54:00:e2:0c:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-g1", "disk.raw")),
		lab.AddVM("node-g2", "52:54:00:e2:0c:02", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-g2", "disk.raw")),
	}
	bmc := startRedfishBMC(t, s, agentVM(vms[0]), agentVM(vms[1]))
	uuids := make([]string, len(vms))
	for i, vm := range vms {
		uuids[i] = createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC, "--deploy-interface", "direct", "--boot-interface", "ipxe")
		defer printNodeHistory(t, s, uuids[i])
		s.mustCLI(t, "node", "manage", uuids[i], "--wait", seconds(manageWait))
		s.mustCLI(t, "node", "provide", uuids[i], "--wait", seconds(provideWait))
	}
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EscenarioG e2e"
	configDrive := func(host string) string {
		return fmt.Sprintf(`{"meta_data": {"hostname": %q, "public_keys": {"0": %q}}}`, host, pubKey)
	}

	if !t.Run("two_deploys_at_once", func(t *testing.T) {
		begin := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(vms))
		for i, vm := range vms {
			s.setImage(t, uuids[i], images.URL, sum)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.baremetal(t, "node", "deploy", uuids[i], "--config-drive", configDrive(vm.Name), "--wait", seconds(deployWait))
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				s.failStep(t, uuids[i], vms[i].SerialLog, fmt.Errorf("%s: %w", vms[i].Name, err))
			}
		}
		t.Logf("G: both nodes active %.1fs after the deploys started", time.Since(begin).Seconds())
		for i, vm := range vms {
			printTimeline(t, s, uuids[i], "deploy of "+vm.Name+" (G)")
			waitBootedFromDisk(t, vm, vm.Name, pubKey)
		}
		if n := images.Gets(); n != len(vms) {
			t.Errorf("the image was downloaded %d times for %d deploys: %v", n, len(vms), images.Requests())
		}
		t.Logf("G: both VMs booted their disks %.1fs after the deploys started", time.Since(begin).Seconds())
	}) {
		return
	}

	t.Run("bad_checksum_retry_then_worker_killed_mid_write", func(t *testing.T) {
		g1, vm1 := uuids[0], vms[0]
		s.mustCLI(t, "node", "undeploy", g1, "--wait", seconds(provideWait))
		begin := time.Now()
		bootsBefore := countLines(vm1.SerialLog, seaBIOSBanner)
		getsBefore := images.Gets()
		wrong := sha256.Sum256([]byte("not the image"))
		s.setImage(t, g1, images.URL, hex.EncodeToString(wrong[:]))
		if _, err := s.baremetal(t, "node", "deploy", g1, "--config-drive", configDrive("e2e-d"), "--wait", seconds(deployWait)); err == nil {
			t.Fatalf("D: a deploy with a wrong checksum succeeded")
		}
		f := s.nodeFields(t, g1)
		lastErr, _ := f["last_error"].(string)
		t.Logf("D: node is %v after %.1fs, last_error: %s", f["provision_state"], time.Since(begin).Seconds(), lastErr)
		if f["provision_state"] != "deploy failed" || !strings.Contains(strings.ToLower(lastErr), "checksum") {
			t.Fatalf("D: want deploy failed with a last_error naming the checksum, got %v: %q\n%s", f["provision_state"], lastErr, s.logTail())
		}
		s.mustCLI(t, "node", "set", g1, "--instance-info", "image_os_hash_value="+sum)

		// E rides on the retried write: the image server holds the download
		// half way, the worker is killed, started again, and the download
		// goes on.
		reached, release := images.HoldNextDownload()
		defer release()
		s.signal(t, g1, "retry")
		select {
		case <-reached:
		case <-time.After(deployWait):
			t.Fatalf("E: the retried write never downloaded the image: %v\nnode: %s\n%s", images.Requests(), s.nodeShow(t, g1), s.logTail())
		}
		t.Logf("E: the agent is half way through the image; killing the worker")
		s.killWorker(t)
		s.startWorker(t)
		release()
		elapsed := s.waitProvisionState(t, g1, "active", deployWait, vm1)
		t.Logf("D+E: node active %.1fs after the retry (%.1fs after the first deploy started)", elapsed.Seconds(), time.Since(begin).Seconds())
		waitBootedFromDisk(t, vm1, "e2e-d", pubKey)
		printTimeline(t, s, g1, "deploy with a wrong checksum, retry and a worker crash (D, E)")
		if n := images.Gets() - getsBefore; n != 2 {
			t.Errorf("E: %d image downloads for the failed write and its retry, want 2 (one each): %v", n, images.Requests())
		}
		if n := countLines(vm1.SerialLog, seaBIOSBanner) - bootsBefore; n != 2 {
			t.Errorf("E: the VM booted %d times during the deploy, want 2 (agent, then disk)", n)
		}
		raw, err := workflowHistory(s, g1)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := powerActions(raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("E: power actions of the deploy: %v", acts)
		if on := countPowerOns(acts); on != 2 {
			t.Errorf("E: %d power-ons (%v), want 2: boot the agent, boot the instance", on, acts)
		}
	})

	t.Run("machine_lost_mid_write", func(t *testing.T) {
		g2, vm2 := uuids[1], vms[1]
		s.mustCLI(t, "node", "undeploy", g2, "--wait", seconds(provideWait))
		s.setImage(t, g2, images.URL, sum)
		// A lost agent cannot be retried in place: this node's operator
		// wait is short, so the workflow gives up at once and cleans up.
		s.mustCLI(t, "node", "set", g2, "--driver-info", "operator_wait_timeout=1")
		reached, release := images.HoldNextDownload()
		defer release()
		s.mustCLI(t, "node", "deploy", g2, "--config-drive", configDrive("e2e-f"))
		select {
		case <-reached:
		case <-time.After(deployWait):
			t.Fatalf("the agent never downloaded the image: %v\nnode: %s\n%s", images.Requests(), s.nodeShow(t, g2), s.logTail())
		}
		pid := bmc.qemuPID(t, vm2)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill QEMU of %s (pid %d): %v", vm2.Name, pid, err)
		}
		t.Logf("F: QEMU of %s (pid %d) killed while its agent writes", vm2.Name, pid)
		release()
		elapsed := s.waitProvisionState(t, g2, "deploy failed", agentHeartbeatTimeout+lostAgentSlack, vm2)
		t.Logf("F: deploy failed %.1fs after the machine went away (heartbeat timeout %s)", elapsed.Seconds(), agentHeartbeatTimeout)
		s.waitWorkflow(t, g2, lostAgentSlack)
		printTimeline(t, s, g2, "deploy whose machine went away (F)")
		f := s.nodeFields(t, g2)
		lastErr, _ := f["last_error"].(string)
		t.Logf("F: node %v, power %v, last_error: %s", f["provision_state"], f["power_state"], lastErr)
		if f["provision_state"] != "deploy failed" || !strings.Contains(lastErr, "stopped heartbeating") {
			t.Errorf("F: want deploy failed with a last_error saying the agent stopped heartbeating, got %v: %q", f["provision_state"], lastErr)
		}
		if f["power_state"] != "power off" {
			t.Errorf("F: node power_state is %v after the failure, want power off", f["power_state"])
		}
		// Nothing is left that would boot the agent again.
		out, err := lab.Command("busybox", "wget", "-q", "-O", "/dev/null", "http://"+bootListen+"/boot/"+g2+"/boot.ipxe").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "404") {
			t.Errorf("F: the node's iPXE script is still served after the failure (want 404): err %v: %s", err, out)
		}
	})
}

// waitWorkflow waits, at most limit, until the node's workflow has closed.
func (s *stack) waitWorkflow(t *testing.T, uuid string, limit time.Duration) {
	t.Helper()
	cmd := s.lab.Command(temporalCLI(), "workflow", "result", "--address", "127.0.0.1:"+temporalPort,
		"--workflow-id", "node-"+uuid)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("workflow node-%s has not closed within %s: %v: %s\nnode: %s", uuid, limit, err, out.String(), s.nodeShow(t, uuid))
	}
}

// setImage points the node's instance_info at an image with its sha256.
func (s *stack) setImage(t *testing.T, uuid, url, sum string) {
	t.Helper()
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+url,
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
}

// signal sends an operator signal to the node's workflow with the
// temporal CLI, as docs/operator-guide.md tells operators to.
func (s *stack) signal(t *testing.T, uuid, name string) {
	t.Helper()
	out, err := s.lab.Command(temporalCLI(), "workflow", "signal", "--address", "127.0.0.1:"+temporalPort,
		"--workflow-id", "node-"+uuid, "--name", name).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow signal %s node-%s: %v: %s", name, uuid, err, out)
	}
	t.Logf("signal %s sent to node-%s", name, uuid)
}

// waitProvisionState polls the node until it is in state, and returns how
// long that took; it fails the test after limit or in another final state.
func (s *stack) waitProvisionState(t *testing.T, uuid, state string, limit time.Duration, vm *LabVM) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	last := ""
	for {
		out, err := s.runCLI(t, false, "node", "show", uuid, "-f", "value", "-c", "provision_state")
		if err == nil {
			last = strings.TrimSpace(out)
			if last == state {
				return time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is %q, not %q, %s later\nnode: %s\n%s\nVM console tail:\n%s", uuid, last, state, limit, s.nodeShow(t, uuid), s.logTail(), embedded.Tail(vm.SerialLog, 3000))
		}
		time.Sleep(statePollInterval)
	}
}

// qemuPID is the pid of the VM's QEMU, as the vbmc recorded it.
func (v *vbmcServer) qemuPID(t *testing.T, vm *LabVM) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(v.stateDir, vm.Name, "qemu.pid"))
	if err != nil {
		t.Fatalf("QEMU pid of %s: %v", vm.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("QEMU pid of %s: %v", vm.Name, err)
	}
	return pid
}

// countLines counts the lines of a file that contain substr.
func countLines(path, substr string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			n++
		}
	}
	return n
}

// countPowerOns counts the actions that start a machine (bmc power actions
// "power on" and "rebooting").
func countPowerOns(actions []string) int {
	n := 0
	for _, a := range actions {
		if a == "power on" || a == "rebooting" {
			n++
		}
	}
	return n
}
