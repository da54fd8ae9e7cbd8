package metal3

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var simBuild struct {
	once sync.Once
	bin  string
	err  error
}

// startMachine runs the simmachine command (its own module, see
// simmachine/main.go) for the node: it boots simulated agents whenever
// the node waits for one. It stops when the test ends.
func startMachine(t *testing.T, nodeUUID string, macs ...string) {
	t.Helper()
	simBuild.once.Do(func() {
		simBuild.bin = filepath.Join(stack.dir, "simmachine")
		cmd := exec.Command("go", "build", "-o", simBuild.bin, ".")
		cmd.Dir = "simmachine"
		if out, err := cmd.CombinedOutput(); err != nil {
			simBuild.err = err
			t.Logf("build simmachine: %s", out)
		}
	})
	if simBuild.err != nil {
		t.Fatalf("build simmachine: %v", simBuild.err)
	}
	log, err := os.Create(filepath.Join(stack.dir, "simmachine-"+nodeUUID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(simBuild.bin, "-api", stack.APIURL, "-node", nodeUUID, "-macs", strings.Join(macs, ","))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "SIMMACHINE_API_USER="+apiUser, "SIMMACHINE_API_PASSWORD="+apiPassword)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
}

// machineBoots is how many agents the node's machine booted.
func machineBoots(nodeUUID string) int {
	b, _ := os.ReadFile(filepath.Join(stack.dir, "simmachine-"+nodeUUID+".log"))
	return strings.Count(string(b), "booted a simulated agent")
}

// waitConfigDriveWritten waits until an agent of the node's machine
// stopped after writing a config drive (an ISO 9660 image) to its disk.
func waitConfigDriveWritten(t *testing.T, nodeUUID string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(stack.dir, "simmachine-"+nodeUUID+".log"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "stopped: config drive writes") && !strings.Contains(line, "writes 0,") {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent of the machine wrote a config drive:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
