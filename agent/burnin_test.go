package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func resNum(t *testing.T, m map[string]any, k string) float64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("%s missing from %v", k, m)
	}
	return v
}

func TestBurninCPUAndMemory(t *testing.T) {
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	ctx := context.Background()
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: "burnin_cpu", Args: map[string]any{"timeout": 2}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var progress []client.Progress
	r, err = c.WaitCommand(ctx, r.ID, 300*time.Millisecond, func(r client.CommandResult) {
		if p, ok := r.Progress(); ok {
			progress = append(progress, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Result map[string]any `json:"clean_result"`
	}
	json.Unmarshal(r.CommandResult, &body)
	if resNum(t, body.Result, "ops") < 1 || resNum(t, body.Result, "errors") != 0 || resNum(t, body.Result, "seconds") < 2 {
		t.Fatalf("burnin_cpu result %v", body.Result)
	}
	if len(progress) == 0 || progress[len(progress)-1].Fraction <= 0 || progress[len(progress)-1].Checkpoint["step"] != "burnin_cpu" {
		t.Fatalf("burnin_cpu progress %+v", progress)
	}
	// Resuming from a checkpoint: an hour's burn-in that already ran
	// 3599 s finishes in about a second and keeps the counts.
	start := time.Now()
	res, err := runStep(t, c, "burnin_cpu", map[string]any{"timeout": 3600,
		"checkpoint": map[string]any{"step": "burnin_cpu", "elapsed_seconds": 3599, "ops": 1e6}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second || resNum(t, res, "ops") < 1e6 || resNum(t, res, "seconds") < 3599 {
		t.Fatalf("resume ran %s: %v", d, res)
	}
	res, err = runStep(t, c, "burnin_memory", map[string]any{"timeout": 1, "vm_bytes": "8M"})
	if err != nil {
		t.Fatal(err)
	}
	if resNum(t, res, "bytes") != 8<<20 || resNum(t, res, "passes") < 1 || resNum(t, res, "errors") != 0 {
		t.Fatalf("burnin_memory result %v", res)
	}
	if _, err := runStep(t, c, "burnin_memory", map[string]any{"timeout": 1, "vm_bytes": "lots"}); err == nil || !strings.Contains(err.Error(), "vm_bytes") {
		t.Fatalf("bad vm_bytes: %v", err)
	}
}

func TestMemPassFindsBadWords(t *testing.T) {
	buf := make([]uint64, 1<<12)
	for p := range memPatterns {
		if bad, done := memPass(context.Background(), buf, p, 3); bad != 0 || !done {
			t.Fatalf("pattern %s: %d bad", memPatterns[p].name, bad)
		}
	}
	if v, err := parseVMBytes("25%", 1000); err != nil || v != 250 {
		t.Fatal(v, err)
	}
	if v, err := parseVMBytes("2M", 0); err != nil || v != 2<<20 {
		t.Fatal(v, err)
	}
}

func TestBurninDisk(t *testing.T) {
	api := newFakeAPI(t)
	const size = 10 << 20
	hw := newFileHardware(t, size, size)
	_, c := startAgent(t, api, hw, nil)
	res, err := runStep(t, c, "burnin_disk", map[string]any{"loops": 2})
	if err != nil {
		t.Fatal(err)
	}
	disks, _ := res["disks"].(map[string]any)
	for _, name := range []string{"/dev/vda", "/dev/vdb"} {
		d, _ := disks[name].(map[string]any)
		if resNum(t, d, "passes") != 2 || resNum(t, d, "errors") != 0 || resNum(t, d, "bytes_written") != 2*(size-diskReserve) || resNum(t, d, "bytes_read") != 2*(size-diskReserve) {
			t.Fatalf("%s: %v", name, d)
		}
	}
	if res["resumed"] != false {
		t.Fatalf("fresh run resumed: %v", res)
	}
	// The checkpoint is wiped at the end, and the pattern is on the disk.
	disk, _ := os.ReadFile(hw.path(0))
	if !bytes.Equal(disk[size-diskReserve:size-diskReserve+checkpointBlock], make([]byte, checkpointBlock)) {
		t.Fatal("checkpoint left on the disk")
	}
	if bytes.Equal(disk[:4096], make([]byte, 4096)) {
		t.Fatal("no pattern written")
	}
	if _, err := runStep(t, c, "burnin_disk", map[string]any{"loops": 0}); err == nil {
		t.Fatal("runtime 0 and loops 0 accepted")
	}
	// A timed burn-in stops at its runtime.
	start := time.Now()
	res, err = runStep(t, c, "burnin_disk", map[string]any{"runtime": 1})
	if err != nil || time.Since(start) > 20*time.Second || resNum(t, res, "seconds") < 1 {
		t.Fatalf("timed burn-in: %v %v", res, err)
	}
}

// interruptedDisk lays down what a burn-in killed by a reboot leaves on a
// disk: pass 0 written up to writtenTo (the pattern) and a checkpoint.
func interruptedDisk(t *testing.T, path string, size int64, cp diskCheckpoint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev := fileDevice{File: f, size: size}
	written := cp.Offset
	if cp.Verify {
		written = cp.End
	}
	buf := make([]byte, written)
	fillPattern(buf, cp.Seed, cp.Pass, 0)
	f.WriteAt(buf, 0)
	if err := writeDiskCheckpoint(dev, &cp); err != nil {
		t.Fatal(err)
	}
}

func TestBurninDiskResumesFromCheckpoint(t *testing.T) {
	api := newFakeAPI(t)
	const size = 10 << 20
	hw := newFileHardware(t, size)
	limit := int64(size - diskReserve)
	// Interrupted in the write phase of the only pass, 4 MiB in.
	interruptedDisk(t, hw.path(0), size, diskCheckpoint{Magic: checkpointMagic, Seed: 42, Loops: 1, Size: size,
		Offset: 4 << 20, Elapsed: 7, Written: 4 << 20})
	_, c := startAgent(t, api, hw, nil)
	res, err := runStep(t, c, "burnin_disk", map[string]any{"loops": 1})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := res["disks"].(map[string]any)["/dev/vda"].(map[string]any)
	// The resumed run writes only the rest, verifies everything (the part
	// written before the reboot included: errors would show if the seed
	// or offsets were not resumed), and counts the earlier time.
	if res["resumed"] != true || resNum(t, d, "passes") != 1 || resNum(t, d, "errors") != 0 ||
		resNum(t, d, "bytes_written") != float64(limit) || resNum(t, d, "bytes_read") != float64(limit) || resNum(t, res, "seconds") < 7 {
		t.Fatalf("resume: %v", res)
	}
	// Interrupted while verifying, with one sector gone bad since it was
	// written: the resumed verify finds it.
	interruptedDisk(t, hw.path(0), size, diskCheckpoint{Magic: checkpointMagic, Seed: 9, Loops: 1, Size: size,
		Verify: true, End: limit, Offset: 1 << 20, Written: limit, Read: 1 << 20})
	f, _ := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	f.WriteAt(make([]byte, 512), 6<<20)
	f.Close()
	_, err = runStep(t, c, "burnin_disk", map[string]any{"loops": 1})
	if err == nil || !strings.Contains(err.Error(), "1 sectors read back wrong") {
		t.Fatalf("want a bad sector, got %v", err)
	}
	// A checkpoint made with other arguments is not resumed.
	interruptedDisk(t, hw.path(0), size, diskCheckpoint{Magic: checkpointMagic, Seed: 1, Loops: 3, Size: size, Offset: 1 << 20})
	res, err = runStep(t, c, "burnin_disk", map[string]any{"loops": 1})
	if err != nil || res["resumed"] != false {
		t.Fatalf("foreign checkpoint: %v %v", res, err)
	}
}

func TestBurninNetwork(t *testing.T) {
	api := newFakeAPI(t)
	a, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	res, err := runStep(t, c, "burnin_network", map[string]any{"runtime": 1})
	if err != nil {
		t.Fatal(err)
	}
	if res["role"] != "loopback" || resNum(t, res, "bytes") <= 0 || resNum(t, res, "errors") != 0 {
		t.Fatalf("loopback: %v", res)
	}
	// A reader and a writer, as two nodes would pair.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var wg sync.WaitGroup
	var rres, wres any
	var rerr, werr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		rres, rerr = a.burninNetwork(context.Background(), &command{}, map[string]any{"runtime": 2.0, "role": "reader", "port": float64(port)}, nil)
	}()
	go func() {
		defer wg.Done()
		wres, werr = a.burninNetwork(context.Background(), &command{}, map[string]any{"runtime": 2.0, "role": "writer", "partner": "127.0.0.1", "port": float64(port)}, nil)
	}()
	wg.Wait()
	if rerr != nil || werr != nil {
		t.Fatal(rerr, werr)
	}
	rb, wb := rres.(map[string]any)["bytes"].(int64), wres.(map[string]any)["bytes"].(int64)
	if rb <= 0 || wb < rb {
		t.Fatalf("reader got %d bytes, writer sent %d", rb, wb)
	}
	if _, err := runStep(t, c, "burnin_network", map[string]any{"role": "writer"}); err == nil || !strings.Contains(err.Error(), "partner") {
		t.Fatalf("writer without partner: %v", err)
	}
}

func TestStepTables(t *testing.T) {
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	ctx := context.Background()
	cs, err := c.GetCleanSteps(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	prio := map[string]int{}
	for _, s := range cs.Steps {
		prio[s.Step] = s.Priority
		if !s.Abortable || s.RebootRequested || s.Interface != "deploy" {
			t.Errorf("%s: %+v", s.Step, s)
		}
	}
	want := map[string]int{"erase_devices_metadata": 99, "erase_devices": 10, "erase_devices_express": 0, "erase_pstore": 0,
		"clean_uefi_nvram": 0, "burnin_cpu": 0, "burnin_memory": 0, "burnin_disk": 0, "burnin_network": 0}
	if len(prio) != len(want) {
		t.Fatalf("clean steps %v", prio)
	}
	for k, v := range want {
		if p, ok := prio[k]; !ok || p != v {
			t.Errorf("%s: priority %d (%v), want %d", k, p, ok, v)
		}
	}
	for _, s := range cs.Steps {
		if s.Step == "burnin_disk" && s.ArgsInfo["runtime"] == nil {
			t.Errorf("burnin_disk argsinfo %v", s.ArgsInfo)
		}
	}
	ss, err := c.GetServiceSteps(ctx, nil, nil)
	if err != nil || len(ss.Steps) != 4 {
		t.Fatalf("service steps %+v %v", ss, err)
	}
	for _, s := range ss.Steps {
		if strings.HasPrefix(s.Step, "erase_devices") || s.Step == "burnin_disk" || s.Step == "clean_uefi_nvram" || s.Priority != 0 {
			t.Errorf("service step %+v would harm an active node", s)
		}
	}
	// A destructive step is not a service step.
	r, err := c.ExecuteServiceStep(ctx, client.Step{Step: "erase_devices", Interface: "deploy"}, nil, nil)
	if err == nil {
		_, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "Could not find method: erase_devices") {
		t.Fatalf("erase_devices as a service step: %v", err)
	}
	r, err = c.ExecuteServiceStep(ctx, client.Step{Step: "erase_pstore", Interface: "deploy"}, nil, nil)
	if err == nil {
		r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err != nil || !strings.Contains(string(r.CommandResult), `"service_result"`) {
		t.Fatalf("erase_pstore service step: %s %v", r.CommandResult, err)
	}
}

// TestBurninDiskResumesAfterAgentStops: an agent stopped in the middle of
// a burn-in (as a reboot stops it) leaves its checkpoint on the disk; the
// next agent on the same disk, asked for the same step, carries on from
// there instead of starting over.
func TestBurninDiskResumesAfterAgentStops(t *testing.T) {
	const size, loops = 8 << 20, 300
	hw := newFileHardware(t, size)
	api := newFakeAPI(t)
	cfg := Config{APIURL: api.URL, LookupAddresses: []string{"52:54:00:12:34:56"}, ListenAddr: "127.0.0.1:0",
		HeartbeatInterval: time.Hour, Hardware: hw, Logger: testLogger(t)}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-first.LookedUp()
	c, err := client.New(first.CallbackURL(), first.Token(), client.WithCAPEM(first.CACertPEM()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ExecuteCleanStep(context.Background(), client.Step{Step: "burnin_disk", Args: map[string]any{"loops": loops}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	var passes float64
	for time.Now().Before(deadline) {
		cr, err := c.Command(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cr.Done() {
			t.Fatalf("burn-in finished before it could be interrupted: %s", cr.CommandResult)
		}
		if p, ok := cr.Progress(); ok {
			if passes, _ = p.Checkpoint["passes"].(float64); passes >= 3 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if passes < 3 {
		t.Fatal("burn-in made no progress")
	}
	stop()
	<-first.Done()
	f, _ := os.Open(hw.path(0))
	cp, ok := readDiskCheckpoint(fileDevice{File: f, size: size})
	f.Close()
	if !ok || cp.Pass < 3 || cp.Pass >= loops {
		t.Fatalf("checkpoint after the stop: %+v %v", cp, ok)
	}
	api.mu.Lock()
	api.issued = false
	api.mu.Unlock()
	_, c2 := startAgent(t, api, hw, nil)
	start := time.Now()
	res, err := runStep(t, c2, "burnin_disk", map[string]any{"loops": loops})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := res["disks"].(map[string]any)["/dev/vda"].(map[string]any)
	if res["resumed"] != true || resNum(t, d, "passes") != loops || resNum(t, d, "errors") != 0 {
		t.Fatalf("resumed run: %v", res)
	}
	// The disk holds the last pass's pattern made with the first run's
	// seed: the second run continued the first one's passes (a fresh run
	// would have drawn a new seed).
	disk, _ := os.ReadFile(hw.path(0))
	want := make([]byte, 4096)
	fillPattern(want, cp.Seed, loops-1, 0)
	if !bytes.Equal(disk[:4096], want) {
		t.Fatal("the disk does not hold the first run's pattern: the burn-in started over")
	}
	t.Logf("interrupted at pass %d, resumed run took %s", cp.Pass, time.Since(start))
}
