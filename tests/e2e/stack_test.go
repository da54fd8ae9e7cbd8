package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/baremetalcli"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

// Where ironflow listens inside a lab. Each lab is its own namespace, so
// fixed ports never collide between tests.
const (
	apiListen    = LabAddress + ":6385"
	bootListen   = LabAddress + ":8080"
	tftpListen   = LabAddress + ":69"
	temporalPort = "7233"
	// stackReadyTimeout bounds `ironflow dev` bringing up PostgreSQL,
	// Temporal, the API and PXE services on a loaded machine.
	stackReadyTimeout = 3 * time.Minute
)

// Scenario timeouts, on a loaded 2-core machine under TCG (measured:
// PXE → agent → image → disk boot 22–32 s per VM).
const (
	manageWait  = 2 * time.Minute
	provideWait = 5 * time.Minute
	deployWait  = 10 * time.Minute
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	// binDir is the directory of a binary built by the tests, removed
	// when they end.
	binDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ironflowBinary is $IRONFLOW_BIN (make test builds it) or a fresh build,
// made once for every test.
func ironflowBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "ironflow-e2e-bin-"); binErr != nil {
			return
		}
		binPath, binErr = devstack.IronflowBinary("", binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// temporalCLI is the Temporal CLI package embedded finds ($IRONFLOW_TEMPORAL_BIN,
// ./bin/temporal from make tools, PATH).
func temporalCLI() string {
	bin, err := embedded.FindTemporalCLI("")
	if err != nil {
		return filepath.Join(RepoRoot(), "bin", "temporal")
	}
	return bin
}

// agentImages finds the agent kernel and initramfs that `make ramdisk`
// builds: $IRONFLOW_IMAGES_DIR or .data/images (agent.kernel,
// agent.initramfs), else the ramdisk builder's own output in .data/ramdisk.
func agentImages(t testing.TB) (kernel, initramfs string) {
	t.Helper()
	type pair struct{ k, i string }
	var cands []pair
	if d := os.Getenv("IRONFLOW_IMAGES_DIR"); d != "" {
		cands = append(cands, pair{filepath.Join(d, "agent.kernel"), filepath.Join(d, "agent.initramfs")})
	}
	data := filepath.Join(RepoRoot(), ".data")
	cands = append(cands,
		pair{filepath.Join(data, "images", "agent.kernel"), filepath.Join(data, "images", "agent.initramfs")},
		pair{filepath.Join(data, "ramdisk", "vmlinuz"), filepath.Join(data, "ramdisk", "initramfs.cpio.gz")})
	for _, c := range cands {
		if _, err := os.Stat(c.k); err != nil {
			continue
		}
		if _, err := os.Stat(c.i); err == nil {
			return c.k, c.i
		}
	}
	t.Fatalf("no agent ramdisk: run `make ramdisk` (looked for %v)", cands)
	return "", ""
}

// linkOrCopy puts src at dst without changing src.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// stack is `ironflow dev` running inside a lab: API, worker, PXE (DHCP on
// the bridge, TFTP, HTTP boot), embedded PostgreSQL and Temporal.
//
// A split stack (startSplitStack) is devstack's Stack instead, each part a
// process of its own inside the lab, so that a scenario can kill one.
type stack struct {
	lab *Lab
	// api and boot are the API's and the boot service's host:port as the
	// lab reaches them: apiListen and bootListen, bracketed IPv6 on
	// startIPv6Stack's.
	api, boot string
	bin       string
	dataDir   string
	imagesDir string
	// procs are the stack's processes besides a split stack's parts
	// (ironflow dev, BMC simulators), for log tails.
	procs []*Process
	// split is the split stack's parts (nil for ironflow dev).
	split *devstack.Stack
	// apiCA, when set, is the CA file of an HTTPS API: the CLI speaks
	// https and trusts it.
	apiCA string
	// cli is the fork server of the baremetal CLI inside the lab's
	// namespace (baremetalcli), started at the first CLI run.
	cliOnce sync.Once
	cli     *baremetalcli.Server
	cliErr  error
}

// logTail is the end of every stack process's log, for failure messages.
func (s *stack) logTail() string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "--- %s log tail (%s):\n%s\n", p.Name, p.Log, p.Tail(3000))
	}
	if s.split != nil {
		b.WriteString(s.split.LogTail(3000))
	}
	return b.String()
}

// newStack prepares a stack's directories: a data directory and an images
// directory with the agent kernel and initramfs and the test image.
func newStack(t *testing.T, lab *Lab) *stack {
	t.Helper()
	s := &stack{lab: lab, bin: ironflowBinary(t), api: apiListen, boot: bootListen}
	// PostgreSQL runs as an unprivileged user: its directory must be
	// reachable by it, which t.TempDir's 0700 parents are not.
	dir, err := os.MkdirTemp("", "ironflow-e2e-stack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack: data kept for analysis in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	_ = os.Chmod(dir, 0o755)
	s.dataDir = filepath.Join(dir, "data")
	s.imagesDir = filepath.Join(dir, "images")
	if err := os.MkdirAll(s.imagesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	k, i := agentImages(t)
	img, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	for src, name := range map[string]string{k: "agent.kernel", i: "agent.initramfs", img: "e2e-test.img"} {
		if err := linkOrCopy(src, filepath.Join(s.imagesDir, name)); err != nil {
			t.Fatalf("stack: images dir: %v", err)
		}
	}
	// The arm64 agent and loaders when make ramdisk-arm64 built them: the
	// boot service picks its loaders up at start (arm64ImageNames).
	for _, name := range arm64ImageNames {
		if src := findImage(name); src != "" {
			if err := linkOrCopy(src, filepath.Join(s.imagesDir, name)); err != nil {
				t.Fatalf("stack: images dir: %v", err)
			}
		}
	}
	return s
}

// arm64ImageNames are the files of the arm64 agent and loaders that make
// ramdisk-arm64 puts into the images directory.
var arm64ImageNames = []string{"agent.kernel.aarch64", "agent.initramfs.aarch64", "grubaa64.efi", "shimaa64.efi"}

// findImage is name in $IRONFLOW_IMAGES_DIR or .data/images, "" when in
// neither.
func findImage(name string) string {
	var dirs []string
	if d := os.Getenv("IRONFLOW_IMAGES_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range append(dirs, filepath.Join(RepoRoot(), ".data", "images")) {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	return ""
}

// bootFlags are the PXE settings of a lab: DHCP on the bridge, TFTP and
// HTTP boot on the lab address.
func (s *stack) bootFlags() []string {
	return []string{
		"--boot-listen", bootListen,
		"--tftp-listen", tftpListen,
		"--dhcp-interface", s.lab.Bridge,
		"--dhcp-server-address", LabAddress,
		"--dhcp-pool", LabNetwork + "," + LabPoolFirst + "," + LabPoolLast,
		"--images-dir", s.imagesDir,
	}
}

// startStack runs `ironflow dev` in the lab with the agent images and the
// test image in its images directory, and waits for the API.
func startStack(t *testing.T, lab *Lab, extra ...string) *stack {
	t.Helper()
	s := newStack(t, lab)
	args := []string{s.bin, "dev",
		"--data-dir", s.dataDir,
		"--listen", apiListen,
		"--agent-api-url", "http://" + apiListen,
		"--boot-url", "http://" + bootListen,
		"--temporal-port", temporalPort,
		"--temporal-ui-port", "-1",
		"--agent-insecure",
		// no_timer_check: a guest under TCG on a loaded host can fail the
		// kernel's IO-APIC timer check and panic at boot though its timer
		// works (image.go).
		"--agent-kernel-params", "console=ttyS0 no_timer_check",
	}
	args = append(append(args, s.bootFlags()...), extra...)
	dev := lab.Start("ironflow-dev", []string{"IRONFLOW_TEMPORAL_BIN=" + temporalCLI()}, args...)
	s.procs = append(s.procs, dev)
	s.waitHTTP(t, "http://"+apiListen+"/v1", dev)
	t.Logf("stack: ironflow dev up: API http://%s, boot http://%s", apiListen, bootListen)
	return s
}

// splitStackConfig holds the flags of a split stack's processes beyond the
// lab's addresses.
type splitStackConfig struct {
	API, Worker []string
}

// startSplitStack runs ironflow as production does, one process per part
// inside the lab (devstack's Stack): PostgreSQL (reached through its unix
// socket, which crosses network namespaces), the Temporal dev server
// (file-backed, in the lab), `ironflow migrate`, `ironflow api`, `ironflow
// pxe` and `ironflow worker`. The worker can be killed and started again
// (killWorker, startWorker); workflows survive it in Temporal.
func startSplitStack(t *testing.T, lab *Lab, cfg splitStackConfig) *stack {
	t.Helper()
	s := newStack(t, lab)
	// Each wait of the start is bounded on its own (ReadyTimeout,
	// package embedded's PostgreSQL and Temporal start timeouts).
	ctx := context.Background()
	port, _ := strconv.Atoi(temporalPort)
	split, err := devstack.StartStack(ctx, devstack.StackConfig{
		Dir:            s.dataDir,
		Bin:            s.bin,
		Log:            slog.New(slog.NewTextHandler(testLog{t}, nil)),
		Command:        lab.Command,
		Probe:          lab.probeHTTP,
		ReadyTimeout:   stackReadyTimeout,
		StopGrace:      processStopTimeout,
		Env:            []string{"IRONFLOW_LOG_LEVEL=debug"},
		PostgresSocket: true,
		TemporalPort:   port,
		APIListen:      apiListen,
		BootURL:        "http://" + bootListen,
		APIArgs:        cfg.API,
		WorkerArgs:     cfg.Worker,
		PXE:            true,
		PXEArgs:        s.bootFlags(),
	})
	if split != nil {
		s.split = split
		t.Cleanup(split.Stop)
	}
	if err != nil {
		t.Fatalf("stack: %v\n%s", err, s.logTail())
	}
	if err := split.WaitHTTP(ctx, "http://"+bootListen+"/images/agent.kernel", split.PXE); err != nil {
		t.Fatalf("stack: %v\n%s", err, s.logTail())
	}
	t.Logf("stack: ironflow api, pxe and worker up: API %s, boot http://%s, Temporal %s", split.APIURL, bootListen, split.Temporal.Address())
	return s
}

// testLog writes a stack's progress lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// startWorker starts the split stack's worker again.
func (s *stack) startWorker(t *testing.T) {
	t.Helper()
	if err := s.split.StartWorker(); err != nil {
		t.Fatalf("stack: %v", err)
	}
}

// killWorker ends the worker as a crash would: SIGKILL, no shutdown.
func (s *stack) killWorker(t *testing.T) {
	t.Helper()
	pid := s.split.Worker.Pid()
	s.split.KillWorker()
	t.Logf("stack: worker (pid %d) killed with SIGKILL", pid)
}

// waitHTTP waits until url answers inside the lab, failing the test when
// p exits first or stackReadyTimeout passes.
func (s *stack) waitHTTP(t *testing.T, url string, p *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stackReadyTimeout)
	defer cancel()
	if err := devstack.WaitReady(ctx, s.lab.probeHTTP, url, p); err != nil {
		t.Fatalf("%v\n%s", err, s.logTail())
	}
}

func (s *stack) imageURL(name string) string { return "http://" + s.boot + "/images/" + name }

// baremetal runs the unmodified baremetal CLI inside the lab. Arguments
// after a "--driver-info" whose value holds a password are masked in logs.
func (s *stack) baremetal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return s.runCLI(t, true, args...)
}

// runCLI is baremetal, logged or not (polls are not). It runs the CLI's
// own entry point in the lab's namespace through a fork server that paid
// its imports once (baremetalcli).
func (s *stack) runCLI(t *testing.T, logIt bool, args ...string) (string, error) {
	t.Helper()
	s.cliOnce.Do(func() {
		s.cli, s.cliErr = baremetalcli.Start(filepath.Join(s.lab.Dir, "cli"), s.lab.Command)
		if s.cliErr == nil {
			// The lab's test, not the subtest that ran the first CLI.
			s.lab.t.Cleanup(s.cli.Close)
		}
	})
	if s.cliErr != nil {
		t.Fatal(s.cliErr)
	}
	endpoint := "http://" + s.api
	if s.apiCA != "" { // an HTTPS API: agent_https_api_test.go
		endpoint = "https://" + s.api
	}
	env := append(os.Environ(), "OS_ENDPOINT="+endpoint, "OS_AUTH_TYPE=none")
	if s.apiCA != "" {
		env = append(env, "OS_CACERT="+s.apiCA)
	}
	start := time.Now()
	r, err := s.cli.Run(context.Background(), env, args...)
	if logIt {
		t.Logf("baremetal %s (%.1fs)", maskArgs(args), time.Since(start).Seconds())
	}
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return r.Stdout, fmt.Errorf("baremetal %s: %w\nstdout: %s\nstderr: %s", maskArgs(args), err, r.Stdout, r.Stderr)
	}
	return r.Stdout, nil
}

func maskArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, _, ok := strings.Cut(a, "="); ok && (strings.Contains(k, "password") || strings.Contains(k, "secret")) {
			a = k + "=******"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// mustCLI is baremetal that fails the test with the ironflow log's tail.
func (s *stack) mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.baremetal(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.logTail())
	}
	return out
}

// deploy runs `baremetal node deploy --wait` with a config drive naming
// the host, and fails the test with the node, the logs and the console
// when it does not reach active.
func (s *stack) deploy(t *testing.T, uuid string, vm *LabVM, hostname, pubKey string) {
	t.Helper()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", metaDataDrive(t, hostname, pubKey), "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
}

// deployNoWait starts the deploy deploy waits for.
func (s *stack) deployNoWait(t *testing.T, uuid, hostname, pubKey string) {
	t.Helper()
	s.mustCLI(t, "node", "deploy", uuid, "--config-drive", metaDataDrive(t, hostname, pubKey))
}

// metaDataDrive is a config drive of the host name and key only.
func metaDataDrive(t *testing.T, hostname, pubKey string) string {
	t.Helper()
	cd, err := json.Marshal(map[string]any{"meta_data": map[string]any{
		"hostname": hostname, "public_keys": map[string]string{"0": pubKey}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(cd)
}

// failStep fails the test with what explains a failed step: the node,
// the stack's logs and the VM's console.
func (s *stack) failStep(t *testing.T, uuid, serialLog string, err error) {
	t.Helper()
	t.Fatalf("%v\nnode: %s\n%s\nVM console tail:\n%s", err, s.nodeShow(t, uuid), s.logTail(), embedded.Tail(serialLog, 3000))
}

// availableWithTestImage brings an enrolled node to available (manage,
// provide) and sets the lab's test image, whose sha256 is sum, as its
// instance image.
func (s *stack) availableWithTestImage(t *testing.T, uuid, sum string) {
	t.Helper()
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
}

// publishImage puts src into the boot service's images directory as name
// and returns its URL as the lab's machines reach it.
func (s *stack) publishImage(t *testing.T, src, name string) string {
	t.Helper()
	if err := linkOrCopy(src, filepath.Join(s.imagesDir, name)); err != nil {
		t.Fatalf("publish %s as %s: %v", src, name, err)
	}
	return s.imageURL(name)
}

// nodeShow is the node's state fields as JSON, for messages.
func (s *stack) nodeShow(t *testing.T, uuid string) string {
	t.Helper()
	out, err := s.baremetal(t, "node", "show", uuid, "-f", "json", "-c", "provision_state", "-c", "target_provision_state",
		"-c", "power_state", "-c", "last_error", "-c", "driver_internal_info")
	if err != nil {
		return err.Error()
	}
	return out
}

// nodeFields reads fields of the node through the CLI.
func (s *stack) nodeFields(t *testing.T, uuid string) map[string]any {
	t.Helper()
	out := s.mustCLI(t, "node", "show", uuid, "-f", "json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("node show %s: %v: %s", uuid, err, out)
	}
	return m
}

// waitBootedFromDisk waits for the test image's markers on the VM's
// console: booted from disk with the firmware, the config drive's host.
func waitBootedFromDisk(t *testing.T, vm *LabVM, hostname, pubKey string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E hostname="+hostname+" key="+pubKey, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware="+vm.Firmware); !ok {
		t.Errorf("VM %s: no booted-from-disk firmware=%s marker on the console", vm.Name, vm.Firmware)
	}
}

// seconds is d as the CLI's --wait wants it.
func seconds(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) }
