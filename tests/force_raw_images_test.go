package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

// TestForceRawImagesThroughTheCache deploys a compressed qcow2 image made
// by qemu-img, declared qcow2, through the boot service's cache with
// --force-raw-images on the worker and the boot service, with a simulated
// agent on the real stack: the cache downloads it once, converts it, keeps
// only the raw entry, and the agent, told raw and the cache's checksum,
// writes the disk `qemu-img convert -O raw` makes.
func TestForceRawImagesThroughTheCache(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (scripts/install-deps.sh installs qemu-utils): the test converts an image it makes")
	}
	dir := t.TempDir()
	const size = 8 << 20
	disk := make([]byte, size)
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < size; i += 3 {
		disk[i] = byte(r.Uint32())
	}
	clear(disk[2<<20 : 5<<20]) // a hole qcow2 leaves unallocated
	clear(disk[440:512])
	entry := disk[446:462]
	entry[4] = 0x83
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], uint32(size/512-2048))
	disk[510], disk[511] = 0x55, 0xaa
	rawPath, qPath, refPath := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2"), filepath.Join(dir, "ref.raw")
	if err := os.WriteFile(rawPath, disk, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"convert", "-c", "-f", "raw", "-O", "qcow2", rawPath, qPath}, {"convert", "-f", "qcow2", "-O", "raw", qPath, refPath}} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
		}
	}
	q, _ := os.ReadFile(qPath)
	ref, _ := os.ReadFile(refPath)
	qsum := sha256.Sum256(q)
	var downloads atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		http.ServeContent(w, r, "disk.qcow2", time.Time{}, bytes.NewReader(q))
	}))
	defer origin.Close()

	_, cacheDir := startCacheGroup(t, "force-raw", "--force-raw-images")
	const mac = "52:54:00:bb:0d:01"
	uuid := enrollAgentNode(t, "force-raw-0", mac, &imageServer{Server: origin, sha256: hex.EncodeToString(qsum[:])})
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_source", "value": origin.URL + "/disk.qcow2"},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
		{"op": "add", "path": "/instance_info/image_download_source", "value": "http"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	n := deployAndWait(t, uuid, "active")
	if n.LastError != nil {
		t.Fatalf("last_error %q", *n.LastError)
	}
	if got := downloads.Load(); got != 1 {
		t.Errorf("the origin served %d downloads, want 1", got)
	}
	// The cache holds the raw entry only.
	metas, _ := filepath.Glob(filepath.Join(cacheDir, "*.json"))
	var keys []string
	for _, mf := range metas {
		var meta struct {
			Key  string `json:"key"`
			Hash string `json:"hash"`
			Size int64  `json:"size"`
		}
		b, _ := os.ReadFile(mf)
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, meta.Key)
		refSum := sha256.Sum256(ref)
		if !strings.HasSuffix(meta.Key, "#raw") || meta.Size != int64(len(ref)) || meta.Hash != hex.EncodeToString(refSum[:]) {
			t.Errorf("cache entry %+v, want the raw disk (%d bytes)", meta, len(ref))
		}
	}
	if len(keys) != 1 {
		t.Errorf("cache entries %v, want the raw one only", keys)
	}
	// The agent wrote the raw disk: all of it (zeros included, as raw
	// images are written), and its first MiB is qemu-img's.
	hw := m.current().Hardware()
	if w := hw.Disks()[0].BytesWritten(); w != int64(len(ref)) {
		t.Errorf("the agent wrote %d bytes, the raw disk is %d", w, len(ref))
	}
	head := diskHead(t, hw, 1<<20)
	if !bytes.Equal(head, ref[:1<<20]) {
		t.Error("the disk's first MiB differs from qemu-img convert -O raw")
	}
}
