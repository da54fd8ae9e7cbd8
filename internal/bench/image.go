package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// Bounds of the image part.
const (
	// imageRounds alternates agent and curl|dd this many times and keeps
	// each one's best: the machine is shared, single runs are noisy.
	imageRounds = 3
	// imageWriteTimeout bounds one write of the image.
	imageWriteTimeout = 5 * time.Minute
	// imageBlock is the random block the generated image repeats.
	imageBlock = 1 << 20
	// childStartTimeout bounds the agent child's start and lookup.
	childStartTimeout = 60 * time.Second
	// diskSlack: the file the agent writes to is a sparse "disk" this much
	// larger than the image and at least the agent's smallest root disk.
	diskSlack = 1 << 30
)

// Environment of the agent writer child process.
const (
	envAPIURL   = "IRONFLOW_BENCH_API_URL"
	envMAC      = "IRONFLOW_BENCH_MAC"
	envNodeUUID = "IRONFLOW_BENCH_NODE_UUID"
	envToken    = "IRONFLOW_BENCH_AGENT_TOKEN" // environment, not argv: argv is world-readable in /proc
	envDisk     = "IRONFLOW_BENCH_DISK"
	envDiskSize = "IRONFLOW_BENCH_DISK_SIZE"
)

func benchImage(ctx context.Context, cfg config, st *stack, dir string, log *slog.Logger) ([]Row, error) {
	size := int64(cfg.imageMiB) << 20
	img, err := newGeneratedImage(size)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	log.Info("image generated", "bytes", size, "sha256", img.sha256)
	disk := filepath.Join(dir, "disk.img")
	var best, bestDD, bestTee time.Duration
	var peak, idle int64
	var profRows []Row
	for round := range imageRounds {
		took, hwm, rss, top, err := agentWrite(ctx, cfg, st, imageSource{URL: img.URL + "/disk.raw", SHA256: img.sha256, Format: "raw"}, disk, size, log)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		if best == 0 || took < best {
			best = took
		}
		peak, idle = max(peak, hwm), max(idle, rss)
		if top != nil {
			profRows = top
		}
		took, err = curlDD(ctx, img.URL+"/disk.raw", disk)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		if bestDD == 0 || took < bestDD {
			bestDD = took
		}
		took, err = curlTeeDD(ctx, img.URL+"/disk.raw", disk, img.sha256)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		if bestTee == 0 || took < bestTee {
			bestTee = took
		}
		log.Info("image round", "round", round, "agent", best, "curl_dd", bestDD, "curl_tee_sha256_dd", bestTee)
	}
	rate := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	label := fmt.Sprintf("%d MiB image, local HTTP into a file", cfg.imageMiB)
	return append([]Row{
		row("image", "agent write_image throughput ("+label+", best of "+strconv.Itoa(imageRounds)+")", rate(best), "MiB/s").
			vs("curl -s URL | dd of=FILE bs=1M conv=fsync", rate(bestDD)).
			note("the agent also verifies sha256 in the same pass and fsyncs, as dd's conv=fsync does; the disk is shared with other users, so read the ratio of best runs"),
		row("image", "agent write_image throughput against a pipeline doing the same verification ("+label+", best of "+strconv.Itoa(imageRounds)+")", rate(best), "MiB/s").
			vs("curl -s URL | tee >(openssl dgst -sha256) | dd of=FILE bs=1M conv=fsync, sum compared", rate(bestTee)).
			note("the same work as the agent (download, sha256, write, fsync) in four processes, which may use both CPUs; openssl, not coreutils sha256sum, which hashes at a fraction of the speed without the CPU's SHA instructions"),
		row("image", "agent peak RSS while writing (VmHWM)", mib(peak), "MiB").vs("agent RSS before the write", mib(idle)),
	}, profRows...), nil
}

// agentWrite runs the agent in a child process on a file "disk", has it
// look up a node ironflow's API knows, and times write_image through its
// command API, as the worker drives it.
func agentWrite(ctx context.Context, cfg config, st *stack, img imageSource, disk string, size int64, log *slog.Logger) (took time.Duration, hwm, idleRSS int64, prof []Row, err error) {
	_ = os.Remove(disk)
	f, err := os.Create(disk)
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("create disk file: %w", err)
	}
	diskSize := max(size+diskSlack, agent.DefaultMinRootDiskSize+diskSlack)
	if err := f.Truncate(diskSize); err != nil {
		f.Close()
		return 0, 0, 0, nil, fmt.Errorf("size disk file: %w", err)
	}
	f.Close()
	defer os.Remove(disk)

	tok := make([]byte, 32)
	_, _ = crand.Read(tok)
	token := base64.RawURLEncoding.EncodeToString(tok)
	mac := fmt.Sprintf("52:56:00:%02x:%02x:%02x", tok[0], tok[1], tok[2])
	name := "bench-image-" + hex.EncodeToString(tok[:4])
	target := provision.Active
	node := &store.Node{
		Name: &name, Driver: "fake-hardware", DeployInterface: "direct", ProvisionState: provision.DeployWait,
		TargetProvisionState: &target,
		DriverInternalInfo:   map[string]any{store.KeyAgentToken: token},
		InstanceInfo:         map[string]any{"image_source": img.URL, "image_os_hash_algo": "sha256", "image_os_hash_value": img.SHA256, "image_disk_format": img.Format},
		DriverInfo:           img.DriverInfo,
		Properties:           img.Properties,
	}
	maps.Copy(node.InstanceInfo, img.InstanceInfo)
	if err := st.store.CreateNode(ctx, node); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("create the image node: %w", err)
	}
	if err := st.store.CreatePort(ctx, &store.Port{Address: mac, NodeUUID: node.UUID, PXEEnabled: true}); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("create the image node's port: %w", err)
	}

	self, err := os.Executable()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+childAgentWriter, envAPIURL+"="+st.APIURL, envMAC+"="+mac,
		envNodeUUID+"="+node.UUID, envToken+"="+token, envDisk+"="+disk, envDiskSize+"="+strconv.FormatInt(diskSize, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("start the agent child: %w", err)
	}
	defer func() {
		stdin.Close() // the child stops when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "callback_url="); ok {
				lines <- v
			}
		}
		close(lines)
	}()
	var callback string
	select {
	case callback = <-lines:
	case <-time.After(childStartTimeout):
	}
	if callback == "" {
		return 0, 0, 0, nil, errors.New("the agent child did not look up its node")
	}
	ac, err := client.New(callback, token)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	defer ac.Close()
	idleRSS = procRSS(cmd.Process.Pid)

	wctx, cancel := context.WithTimeout(ctx, imageWriteTimeout)
	defer cancel()
	var p *profiler
	if cfg.profile {
		p = startPerf(ctx, st.dir, log, map[string]int{"agent": cmd.Process.Pid})
	}
	url := img.URL
	if img.CacheBase != "" {
		// The agent fetches the node's image from the boot service's
		// cache, as the worker points it there (activities' agentImageInfo).
		url = strings.TrimRight(img.CacheBase, "/") + imagecache.CachePath(node.UUID)
	}
	start := time.Now()
	res, err := ac.ExecuteDeployStep(wctx, client.Step{Step: "write_image", Interface: "deploy", Priority: 80, Args: map[string]any{
		"image_info": map[string]any{"urls": []string{url}, "os_hash_algo": "sha256", "os_hash_value": img.SHA256, "disk_format": img.Format},
	}}, map[string]any{"uuid": node.UUID, "instance_info": node.InstanceInfo, "properties": map[string]any{}}, nil)
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("start write_image: %w", err)
	}
	if _, err := ac.WaitCommand(wctx, res.ID, 100*time.Millisecond, nil); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("write_image: %w", err)
	}
	took = time.Since(start)
	hwm = procHWM(cmd.Process.Pid)
	if p != nil {
		p.stop()
		prof = p.rows("image")
	}
	return took, hwm, idleRSS, prof, nil
}

// imageSource is an image the agent child writes: URL (with its sha256
// and format) fetched by the agent, or, with CacheBase (the boot service's
// URL), the node's instance_info image_source (URL, or an oci://
// reference) fetched through the boot service's image cache, with
// InstanceInfo, DriverInfo and Properties added to the node.
type imageSource struct {
	URL, SHA256, Format string
	CacheBase           string
	InstanceInfo        map[string]any
	DriverInfo          map[string]any
	Properties          map[string]any
}

// curlDD is the baseline: the same download written by curl and dd.
func curlDD(ctx context.Context, url, file string) (time.Duration, error) {
	_ = os.Remove(file)
	defer os.Remove(file)
	ctx, cancel := context.WithTimeout(ctx, imageWriteTimeout)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "bash", "-c", `set -o pipefail; curl -sf "$1" | dd of="$2" bs=1M conv=fsync status=none`, "bash", url, file).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("curl | dd: %w: %s", err, out)
	}
	return time.Since(start), nil
}

// curlTeeDD is curlDD with the sha256 the agent verifies: tee hands the
// stream to openssl beside dd, and the sum must be the image's. openssl
// rather than sha256sum: coreutils' sha256sum does not use the CPU's SHA
// instructions and would make the pipeline look slower than it can be.
func curlTeeDD(ctx context.Context, url, file, sum string) (time.Duration, error) {
	_ = os.Remove(file)
	defer os.Remove(file)
	sumFile := file + ".sha256"
	defer os.Remove(sumFile)
	ctx, cancel := context.WithTimeout(ctx, imageWriteTimeout)
	defer cancel()
	start := time.Now()
	// wait $! waits for the process substitution, so the sum is complete.
	out, err := exec.CommandContext(ctx, "bash", "-c", `set -o pipefail; curl -sf "$1" | tee >(openssl dgst -sha256 -r >"$3") | dd of="$2" bs=1M conv=fsync status=none && wait $! && read -r got _ <"$3" && [ "$got" = "$4" ]`,
		"bash", url, file, sumFile, sum).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("curl | tee >(openssl dgst -sha256) | dd: %w: %s", err, out)
	}
	return time.Since(start), nil
}

// runAgentWriterChild is the agent on a file "disk": it looks up its node
// with the token the parent put in the store, says its callback URL on
// stdout, and runs until stdin closes.
func runAgentWriterChild() error {
	size, err := strconv.ParseInt(os.Getenv(envDiskSize), 10, 64)
	if err != nil {
		return fmt.Errorf("disk size: %w", err)
	}
	hw := &fileHardware{path: os.Getenv(envDisk), size: size, mac: os.Getenv(envMAC)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := agent.New(agent.Config{
		APIURL: os.Getenv(envAPIURL), LookupAddresses: []string{hw.mac}, NodeUUID: os.Getenv(envNodeUUID),
		AgentToken: os.Getenv(envToken), ListenAddr: "127.0.0.1:0", Insecure: true, Hardware: hw,
		HeartbeatInterval: time.Minute, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	select {
	case <-a.LookedUp():
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Printf("callback_url=%s\n", a.CallbackURL())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	a.Stop()
	return nil
}

// fileHardware is a machine whose only disk is a file.
type fileHardware struct {
	path string
	size int64
	mac  string
}

func (h *fileHardware) BlockDevices(context.Context) ([]agent.BlockDevice, error) {
	return []agent.BlockDevice{{Name: h.path, Size: h.size, Kind: "disk", Model: "FILE", Serial: "BENCH0"}}, nil
}

func (h *fileHardware) Open(agent.BlockDevice) (agent.Device, error) {
	f, err := os.OpenFile(h.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return fileDevice{File: f, size: h.size}, nil
}

func (h *fileHardware) Inventory(context.Context) (client.Inventory, error) {
	return client.Inventory{
		CPU:        client.CPU{ModelName: "bench", Count: 1, Architecture: "x86_64"},
		Interfaces: []client.Interface{{Name: "eth0", MACAddress: h.mac, HasCarrier: new(true)}},
		Disks:      []client.Disk{{Name: h.path, Size: h.size}},
	}, nil
}

func (h *fileHardware) Power(context.Context, agent.PowerAction) error { return nil }
func (h *fileHardware) SyncAll() error                                 { return nil }
func (h *fileHardware) AddUEFIBootEntry(context.Context, agent.BlockDevice, agent.UEFIPartition, string) error {
	return agent.ErrNotUEFI
}

type fileDevice struct {
	*os.File
	size int64
}

func (d fileDevice) Size() int64 { return d.size }

// generatedImage serves an image of any size without storing it: a random
// block repeated, with range requests, so a 2 GiB image costs 1 MiB.
type generatedImage struct {
	URL    string
	sha256 string
	block  []byte
	size   int64
	srv    *http.Server
}

func newGeneratedImage(size int64) (*generatedImage, error) {
	g := &generatedImage{block: make([]byte, imageBlock), size: size}
	_, _ = crand.Read(g.block)
	h := sha256.New()
	if _, err := io.Copy(h, g.reader()); err != nil {
		return nil, err
	}
	g.sha256 = hex.EncodeToString(h.Sum(nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the image server: %w", err)
	}
	g.URL = "http://" + ln.Addr().String()
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "disk.raw", time.Time{}, g.reader())
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *generatedImage) Close() { _ = g.srv.Close() }

func (g *generatedImage) reader() *patternReader { return &patternReader{block: g.block, size: g.size} }

// patternReader reads size bytes of block repeated.
type patternReader struct {
	block     []byte
	size, off int64
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && p.off < p.size {
		i := p.off % int64(len(p.block))
		c := copy(b[n:], p.block[i:min(int64(len(p.block)), i+p.size-p.off)])
		n += c
		p.off += int64(c)
	}
	return n, nil
}

func (p *patternReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += p.off
	case io.SeekEnd:
		offset += p.size
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	p.off = offset
	return offset, nil
}
