package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/registry"
)

// benchOCI measures the goal of docs/oci-images.md: deploying from a
// registry through the image cache streams at least 0.9x the rate of the
// same image from a plain HTTP server, with the same bounded agent memory.
// The agent child writes the image (as the image part) five ways each
// round, with a fresh image (new bytes, new digest) per round so that the
// cache starts cold:
//
//   - oci, first: an oci:// reference to Debian's docker-registry (TLS,
//     token authentication) through `ironflow pxe`'s image cache: the
//     cache resolves the tag, pulls the layer, verifies its digest, and
//     serves it to the agent;
//   - https and http, first: the same bytes at an https:// (the
//     registry's certificate) and an http:// URL of a plain file server
//     (the registry too serves its blobs from files) through the same
//     cache (image_download_source=http);
//   - oci, cached: a second node of the same reference, served from the
//     cache without the registry;
//   - http, direct: the agent fetching the plain HTTP server's URL itself.
func benchOCI(ctx context.Context, cfg config, st *stack, dir string, log *slog.Logger) (rows []Row, err error) {
	if st.Stack == nil {
		return nil, errors.New("the oci part needs the dev stack")
	}
	t := newBenchT(filepath.Join(dir, "oci"))
	defer t.cleanup()
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(benchFatal); ok {
				err = errors.New(string(f))
				return
			}
			panic(r)
		}
	}()
	reg := registry.StartTokenAuth(t)
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, reg.CAPEM, 0o644); err != nil {
		return nil, err
	}
	size := int64(cfg.ociMiB) << 20
	data := make([]byte, size)
	block := make([]byte, imageBlock)
	_, _ = crand.Read(block)
	for off := 0; off < len(data); off += len(block) {
		copy(data[off:], block)
	}

	// The plain HTTP server: a file server over the directory each round
	// writes its image to, as an image server serves files (the registry
	// too serves its blobs from files).
	served := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.FileServer(http.Dir(served))}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	plain := "http://" + ln.Addr().String()
	// The same file server over TLS, with the registry's certificate (the
	// registry's CA signed it for 127.0.0.1): what TLS costs is not the
	// registry's doing.
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tsrv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.FileServer(http.Dir(served))}
	go func() { _ = tsrv.ServeTLS(tln, filepath.Join(reg.Dir, "cert.pem"), filepath.Join(reg.Dir, "key.pem")) }()
	defer tsrv.Close()
	plainTLS := "https://" + tln.Addr().String()

	// The five writes alternate for cfg.ociRounds rounds, made a multiple
	// of three so that each first deploy goes first, second and third
	// equally often.
	rounds := (cfg.ociRounds + 2) / 3 * 3
	// The boot service with an image cache large enough for every round's
	// three first deploys: each node holds a lease on its image (15
	// minutes), as a deploying node does.
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	bootURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	pxe, err := st.Spawn("ironflow-pxe-oci", append(st.PXEArgs(), "--boot-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--image-cache-dir", filepath.Join(dir, "oci-cache"), "--image-cache-size", strconv.FormatInt(int64(3*rounds+1)*size>>20, 10)+"MiB"))
	if err != nil {
		return nil, err
	}
	defer pxe.Kill()
	if err := waitHTTP(ctx, bootURL+"/health", 30*time.Second); err != nil {
		return nil, fmt.Errorf("the boot service: %w", err)
	}

	// The machine's disk is not the boot service's: in a rack the agent
	// writes to the machine's own disk while the cache writes to the
	// conductor's. The agent's "disk" is a file in memory (tmpfs) when
	// there is room, so that the two writes do not queue on one device
	// here (both sides of every comparison alike).
	disk := filepath.Join(dir, "oci-disk.img")
	if onTmpfs(shmDir, 2*size+diskSlack) {
		disk = filepath.Join(shmDir, fmt.Sprintf("ironflow-oci-disk-%d.img", os.Getpid()))
	}
	secret := reg.User + ":" + reg.Password
	var ociFirst, httpsFirst, httpFirst, ociCached, httpDirect []time.Duration
	var ociHWM, httpHWM int64
	for round := range rounds {
		// New bytes, new digest: the cache starts cold for either origin.
		copy(data, fmt.Sprintf("ironflow oci bench round %d %d", round, time.Now().UnixNano()))
		sum := sha256.Sum256(data)
		hexSum := hex.EncodeToString(sum[:])
		tag := "r" + strconv.Itoa(round)
		// Last round's file goes: the machine's page cache holds this
		// round's copies, not every round's.
		_ = os.RemoveAll(filepath.Join(served, "r"+strconv.Itoa(round-1)))
		if err := os.MkdirAll(filepath.Join(served, tag), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(served, tag, "disk.raw"), data, 0o644); err != nil {
			return nil, err
		}
		reg.PushIndex(t, "bench/disk", []string{tag},
			registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Title: "disk.raw", Data: data})
		ref := "oci://" + reg.Host + "/bench/disk:" + tag
		ociSrc := imageSource{URL: ref, SHA256: hexSum, Format: "raw", CacheBase: bootURL,
			InstanceInfo: map[string]any{"image_pull_secret": secret},
			DriverInfo:   map[string]any{"image_verify_ca": caFile},
			Properties:   map[string]any{"cpu_arch": "x86_64"}}
		httpURL := plain + "/" + tag + "/disk.raw"
		writes := []struct {
			name string
			img  imageSource
			into *[]time.Duration
			hwm  *int64
		}{
			{"oci first", ociSrc, &ociFirst, &ociHWM},
			{"https first", imageSource{URL: plainTLS + "/" + tag + "/disk.raw", SHA256: hexSum, Format: "raw", CacheBase: bootURL,
				InstanceInfo: map[string]any{"image_download_source": "http"},
				DriverInfo:   map[string]any{"image_verify_ca": caFile}}, &httpsFirst, &httpHWM},
			{"http first", imageSource{URL: httpURL, SHA256: hexSum, Format: "raw", CacheBase: bootURL,
				InstanceInfo: map[string]any{"image_download_source": "http"}}, &httpFirst, &httpHWM},
			{"oci cached", ociSrc, &ociCached, &ociHWM},
			{"http direct", imageSource{URL: httpURL, SHA256: hexSum, Format: "raw"}, &httpDirect, &httpHWM},
		}
		// The first deploys take turns at going first.
		firsts := writes[:3]
		for range round % 3 {
			firsts[0], firsts[1], firsts[2] = firsts[1], firsts[2], firsts[0]
		}
		for _, w := range writes {
			// Each write starts with no dirty pages of the ones before it
			// (the push, the file, the last disk) for writeback to throttle
			// it with: the image is written three or four times a round.
			syscall.Sync()
			took, hwm, _, _, err := agentWrite(ctx, cfg, st, w.img, disk, size, log)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, w.name, err)
			}
			*w.into = append(*w.into, took)
			*w.hwm = max(*w.hwm, hwm)
			log.Info("oci round", "round", round, "write", w.name, "took", took.Round(time.Millisecond),
				"MiB/s", fmt.Sprintf("%.0f", float64(size)/(1<<20)/took.Seconds()))
		}
	}
	// A rate is of the geometric mean of a write's times: every write is
	// in every round and each first deploy in each place of the order
	// equally often, so the ratio of two rates is the geometric mean of
	// their ratios round by round, in which a round's pace (the machine's
	// memory fills as rounds go) and the place in the order (the first
	// write after a round's setup is the slowest, whichever it is) cancel.
	rate := func(ds []time.Duration) float64 {
		var logSum float64
		for _, d := range ds {
			logSum += math.Log(d.Seconds())
		}
		return float64(size) / (1 << 20) / math.Exp(logSum/float64(len(ds)))
	}
	label := fmt.Sprintf("%d MiB raw image, geometric mean of %d rounds", cfg.ociMiB, rounds)
	return []Row{
		row("oci", "first deploy of an oci:// image through the image cache (registry over TLS with token auth → cache → agent; "+label+")", rate(ociFirst), "MiB/s").
			vs("the same image from a plain HTTPS file server through the same cache (image_download_source=http)", rate(httpsFirst)).
			note("the goal (docs/oci-images.md): at least 0.9; the cache pulls the image, serving the agent as the bytes arrive, and verifies its sha256 before the last byte; the agent verifies and writes it. The registry, the file server, the cache and the agent share the machine's cores; " + roundRatios(httpsFirst, ociFirst, ociGoal)),
		row("oci", "first deploy of the oci:// image, as above ("+label+")", rate(ociFirst), "MiB/s").
			vs("the same image from a plain HTTP file server, no TLS, through the same cache", rate(httpFirst)).
			note("what TLS to the origin costs on this machine, where the origin's encryption shares the cores too; " + roundRatios(httpFirst, ociFirst, ociGoal)),
		row("oci", "next deploys of the oci:// image, from the cache ("+label+")", rate(ociCached), "MiB/s").
			vs("the agent fetching the plain HTTP server's URL itself (direct)", rate(httpDirect)).
			note("a rack deploys an image once from the registry and then from the cache"),
		row("oci", "agent peak RSS writing the oci:// image (VmHWM)", mib(ociHWM), "MiB").
			vs("agent peak RSS writing the http:// image", mib(httpHWM)).
			note("the same bounded stream either way: the agent sees an HTTP URL"),
	}, nil
}

// ociGoal is the goal of docs/oci-images.md: the first deploy from the
// registry at least 0.9 of the rate from a file server.
const ociGoal = 0.9

// roundRatios is the note of a rate ratio's rounds: each round's ratio
// (base's time over the measured one's: the rate ratio), their median,
// the median's 95 % interval (medianCI) and the verdict against goal
// (met when the whole interval is at or above it, missed when it is all
// below).
func roundRatios(base, measured []time.Duration, goal float64) string {
	var rs []float64
	for i := range min(len(base), len(measured)) {
		if measured[i] > 0 {
			rs = append(rs, base[i].Seconds()/measured[i].Seconds())
		}
	}
	lo, hi, cov, ok := medianCI(rs)
	verdict := "not shown (too few rounds for a 95 % interval: 6 or more)"
	switch {
	case ok && lo >= goal:
		verdict = "met"
	case ok && hi < goal:
		verdict = "missed"
	case ok:
		verdict = "not shown (the interval holds the goal)"
	}
	out := fmt.Sprintf("round ratios %s, median %.2f", joinFloats(rs, "%.2f"), median(rs))
	if ok {
		out += fmt.Sprintf(", 95 %% interval %.2f to %.2f (sign test, %.1f %%)", lo, hi, 100*cov)
	}
	return out + fmt.Sprintf("; against %.2f: %s", goal, verdict)
}

// shmDir is where Linux mounts a tmpfs for everyone.
const shmDir = "/dev/shm"

// onTmpfs reports whether dir is a tmpfs with need bytes free.
func onTmpfs(dir string, need int64) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	const tmpfsMagic = 0x01021994
	return st.Type == tmpfsMagic && int64(st.Bavail)*st.Bsize >= need
}

// waitHTTP waits for url to answer 200.
func waitHTTP(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchT is the registry package's T for the benchmark: a failure ends the
// part (benchFatal, recovered by the part), cleanups run when it ends.
type benchT struct {
	dir      string
	n        int
	cleanups []func()
}

type benchFatal string

func newBenchT(dir string) *benchT { return &benchT{dir: dir} }

func (b *benchT) Helper() {}
func (b *benchT) Skipf(format string, args ...any) {
	panic(benchFatal("skipped: " + fmt.Sprintf(format, args...)))
}
func (b *benchT) Fatal(args ...any) {
	panic(benchFatal(strings.TrimSuffix(fmt.Sprintln(args...), "\n")))
}
func (b *benchT) Fatalf(format string, args ...any) {
	panic(benchFatal(fmt.Sprintf(format, args...)))
}
func (b *benchT) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }
func (b *benchT) TempDir() string {
	b.n++
	d := filepath.Join(b.dir, strconv.Itoa(b.n))
	if err := os.MkdirAll(d, 0o700); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (b *benchT) cleanup() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
}
