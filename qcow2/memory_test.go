package qcow2

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The worst-case memory of Convert is measured in a child process (the
// test binary run again with memChildEnv set, see TestMain), so that
// nothing else of the test binary is in its heap or its RSS.
const (
	memChildEnv  = "QCOW2_MEMORY_CHILD_IMAGE"
	memReportTag = "QCOW2-MEMORY "
	// memChildDisk is the disk the child converts to (Config.MaxSize):
	// 16 TiB, larger than any the agent writes.
	memChildDisk = 16 << 40
)

func TestMain(m *testing.M) {
	if img := os.Getenv(memChildEnv); img != "" {
		os.Exit(memoryChild(img))
	}
	os.Exit(m.Run())
}

// memReport is what a child measured converting one image.
type memReport struct {
	// PeakHeap is the most heap in objects (live, and dead not yet
	// collected) sampled during Convert, above what was before it.
	PeakHeap int64 `json:"peak_heap"`
	// HeapSys is the heap the runtime took from the system, above what
	// it had before.
	HeapSys int64 `json:"heap_sys"`
	// VmHWM is the process's peak resident set (kernel's view).
	VmHWM int64  `json:"vm_hwm"`
	Err   string `json:"err"`
}

func memoryChild(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer f.Close()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	base := read()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	// The file is read as a stream, as the agent reads its download: no
	// buffering of ours. Zeros go through the writer (Config.Zero nil),
	// the path that needs a buffer of its own.
	_, cerr := Convert(f, discard{}, Config{MaxSize: memChildDisk})
	close(stop)
	<-sampled
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	rep := memReport{PeakHeap: peak.Load() - base, HeapSys: int64(after.HeapSys) - int64(before.HeapSys), VmHWM: vmHWM()}
	if cerr != nil {
		rep.Err = cerr.Error()
	}
	b, _ := json.Marshal(rep)
	fmt.Println(memReportTag + string(b))
	return 0
}

// vmHWM is /proc/self/status's VmHWM in bytes (0 where there is none).
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sparseImage writes an image of size bytes with the given extents at
// their offsets and holes elsewhere (so that a 10 GiB image costs nothing).
func sparseImage(t *testing.T, path string, size int64, extents map[int64][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range extents {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// header is a version 3 header of 1<<bits clusters, with an L1 table of
// l1Entries at l1Off; zstd sets the compression type.
func header(bits uint32, vsize int64, l1Entries uint32, l1Off int64, zstdType bool) []byte {
	be := binary.BigEndian
	h := make([]byte, 112+8)
	copy(h, Magic)
	be.PutUint32(h[4:], 3)
	be.PutUint32(h[20:], bits)
	be.PutUint64(h[24:], uint64(vsize))
	be.PutUint32(h[36:], l1Entries)
	be.PutUint64(h[40:], uint64(l1Off))
	be.PutUint32(h[96:], 4)
	be.PutUint32(h[100:], 104)
	if zstdType {
		be.PutUint64(h[72:], incCompression)
		be.PutUint32(h[100:], 112)
		h[104] = 1
	}
	return h // an end-of-extensions marker follows: zeros
}

// compressedEntry is an L2 entry for a compressed cluster of n bytes at off.
func compressedEntry(bits uint32, off, n int64) uint64 {
	x := 62 - (bits - 8)
	sectors := uint64((off&511+n+511)/512 - 1)
	return 1<<62 | sectors<<x | uint64(off)
}

// compressible is a cluster of data that deflates to about a quarter.
func compressible(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		if i%4 == 0 {
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

func deflateOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w, err := newDeflate(&z)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return z.Bytes()
}

// zstdStreamOf is a zstd frame without a content size (a streaming
// encoder's), so that only inflating tells how large it is.
func zstdStreamOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w, err := zstd.NewWriter(&z, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return z.Bytes()
}

// hostileMemoryImages are the images that make Convert hold the most, each
// pushing one of its bounds to the limit, the last all of them at once.
func hostileMemoryImages(t *testing.T, dir string) map[string]string {
	t.Helper()
	be := binary.BigEndian
	const bits = 21
	const cs = int64(1) << bits // 2 MiB, the largest cluster
	images := map[string]string{}
	put := func(name string, size int64, ext map[int64][]byte) {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".qcow2")
		sparseImage(t, p, size, ext)
		images[name] = p
	}

	// The largest L1 table held, every entry an L2 table ahead of the
	// stream: the queue fills to MaxPending and the image is refused.
	// 512-byte clusters, so that the L2 tables map a disk that exists
	// (32 GiB).
	{
		const bits512 = 9
		const cs512 = int64(1) << bits512
		l1 := make([]byte, MaxL1Entries*8)
		for i := range MaxL1Entries {
			be.PutUint64(l1[8*i:], uint64((int64(i)+1<<30)*cs512))
		}
		perL2 := cs512 * cs512 / 8
		put("max L1, queue full", cs512+int64(len(l1)), map[int64][]byte{0: header(bits512, MaxL1Entries*perL2, MaxL1Entries, cs512, false), cs512: l1})
	}

	// 2 MiB clusters that are compressed to two clusters' worth and
	// inflate past the cluster, zlib and zstd.
	for _, z := range []string{"zlib", "zstd"} {
		data := compressible(int(3*cs), 1)
		var comp []byte
		if z == "zstd" {
			comp = zstdStreamOf(t, data)
		} else {
			comp = deflateOf(t, data)
		}
		comp = comp[:min(int64(len(comp)), 2*cs-512)]
		l1 := make([]byte, 8)
		be.PutUint64(l1, uint64(2*cs))
		l2 := make([]byte, 8)
		be.PutUint64(l2, compressedEntry(bits, 3*cs, int64(len(comp))))
		put("compressed past the cluster, "+z, 3*cs+2*cs, map[int64][]byte{0: header(bits, cs, 1, cs, z == "zstd"), cs: l1, 2 * cs: l2, 3 * cs: comp})
	}

	// 2 MiB clusters, in order: data, compressed data and holes written.
	{
		const n = 16
		l1 := make([]byte, 8)
		be.PutUint64(l1, uint64(2*cs))
		l2 := make([]byte, cs)
		ext := map[int64][]byte{0: header(bits, 4*n*cs, 1, cs, false), cs: l1, 2 * cs: l2}
		off := 3 * cs
		for i := range n {
			data := compressible(int(cs), uint64(i))
			if i%2 == 0 {
				ext[off] = data
				be.PutUint64(l2[8*4*i:], uint64(off)|1<<63)
				off += cs
				continue
			}
			comp := deflateOf(t, data)
			ext[off] = comp
			be.PutUint64(l2[8*4*i:], compressedEntry(bits, off, int64(len(comp))))
			off += (int64(len(comp)) + cs - 1) &^ (cs - 1)
		}
		put("2 MiB clusters", off+cs, ext)
	}

	// An L2 table after the data it maps: the 16 MiB from the L1 table to
	// it kept.
	{
		kept := DefaultReorderLimit/cs - 1
		l1 := make([]byte, 8)
		l2Off := (2 + kept) * cs
		be.PutUint64(l1, uint64(l2Off))
		l2 := make([]byte, cs)
		ext := map[int64][]byte{0: header(bits, kept*cs, 1, cs, false), cs: l1, l2Off: l2}
		for i := range kept {
			ext[(2+i)*cs] = compressible(int(cs), uint64(i))
			be.PutUint64(l2[8*i:], uint64((2+i)*cs)|1<<63)
		}
		put("table after 16 MiB of its data", l2Off+cs, ext)
	}

	// All at once: 2 MiB clusters; the largest L1 table, after 16 MiB of
	// compressed data kept for the L2 table that maps it (holes between,
	// zeroed through the writer), which comes after the L1; that L2 table
	// and the next fill the queue with data clusters ahead of the stream.
	// The image is refused when the stream ends before them, once
	// everything has been held.
	{
		kept := DefaultReorderLimit / cs
		l1Off := (1 + kept) * cs
		l1 := make([]byte, MaxL1Entries*8)
		l2Off := l1Off + int64(len(l1))
		l2a, l2b := make([]byte, cs), make([]byte, cs)
		ext := map[int64][]byte{l1Off: l1, l2Off: l2a, l2Off + cs: l2b}
		for i := range kept {
			comp := deflateOf(t, compressible(int(cs), uint64(i)))
			ext[(1+i)*cs] = comp
			be.PutUint64(l2a[8*2*i:], compressedEntry(bits, (1+i)*cs, int64(len(comp))))
		}
		far := int64(1) << 40 // beyond the file, each cluster its own
		for i := 2 * kept; i < cs/8; i++ {
			be.PutUint64(l2a[8*i:], uint64(far)|1<<63)
			far += cs
		}
		for i := range cs / 8 {
			be.PutUint64(l2b[8*i:], uint64(far)|1<<63)
			far += cs
		}
		be.PutUint64(l1, uint64(l2Off))
		be.PutUint64(l1[8:], uint64(l2Off+cs))
		perL2 := cs * cs / 8
		ext[0] = header(bits, 2*perL2, MaxL1Entries, l1Off, false)
		put("all bounds at once", l2Off+2*cs, ext)
	}
	return images
}

// TestHostileImagesStayWithinTheMemoryBound converts each worst-case image
// in a child process and checks the heap it held against MemoryBound, the
// bound the code's limits add up to. The child runs with GOGC=10 so that
// its heap is close to what is live; a second run with the runtime's
// default (the agent's) gives the peak RSS, whose growth over a child that
// converts next to nothing must stay within the bound too.
func TestHostileImagesStayWithinTheMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds 16 MiB images and runs child processes")
	}
	dir := t.TempDir()
	if d := os.Getenv("QCOW2_MEMORY_KEEP"); d != "" {
		dir = d
	}
	start := time.Now()
	images := hostileMemoryImages(t, dir)
	t.Logf("images built in %v", time.Since(start))
	run := func(path, gogc string) memReport {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), memChildEnv+"="+path, "GOGC="+gogc)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		_, js, ok := strings.Cut(string(out), memReportTag)
		if !ok {
			t.Fatalf("child said:\n%s", out)
		}
		var rep memReport
		if err := json.Unmarshal([]byte(strings.TrimSpace(js)), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	// What the runtime and the test binary take, converting next to
	// nothing (a 4 KiB disk).
	tiny := filepath.Join(dir, "tiny.qcow2")
	if err := os.WriteFile(tiny, hostileBits(9, 4096, func([]byte) {}), 0o644); err != nil {
		t.Fatal(err)
	}
	base := run(tiny, "100")
	if base.Err != "" {
		t.Fatalf("the tiny image: %s", base.Err)
	}
	t.Logf("%-34s peak RSS %s (the baseline)", "a 4 KiB disk", mib(base.VmHWM))
	var worst int64
	for _, name := range []string{"max L1, queue full", "compressed past the cluster, zlib", "compressed past the cluster, zstd", "2 MiB clusters", "table after 16 MiB of its data", "all bounds at once"} {
		live := run(images[name], "10")
		dflt := run(images[name], "100")
		t.Logf("%-34s heap %s (GOGC=10), %s (GOGC=100); peak RSS %s; %s", name, mib(live.PeakHeap), mib(dflt.PeakHeap), mib(dflt.VmHWM), orOK(live.Err))
		if live.PeakHeap > MemoryBound {
			t.Errorf("%s: the heap reached %s, above MemoryBound %s", name, mib(live.PeakHeap), mib(MemoryBound))
		}
		if rss := dflt.VmHWM - base.VmHWM; base.VmHWM > 0 && rss > MemoryBound {
			t.Errorf("%s: the peak RSS grew by %s, above MemoryBound %s", name, mib(rss), mib(MemoryBound))
		}
		worst = max(worst, live.PeakHeap)
		wantErr := map[string]error{"max L1, queue full": ErrReorderLimit, "compressed past the cluster, zlib": ErrCorrupt,
			"compressed past the cluster, zstd": ErrCorrupt, "all bounds at once": ErrCorrupt}[name]
		if (wantErr == nil) != (live.Err == "") || wantErr != nil && !strings.Contains(live.Err, wantErr.Error()) {
			t.Errorf("%s: converted with %q, want %v", name, live.Err, wantErr)
		}
	}
	t.Logf("worst heap %s of MemoryBound %s", mib(worst), mib(MemoryBound))
}

func orOK(s string) string {
	if s == "" {
		return "converted"
	}
	return "refused: " + s
}
