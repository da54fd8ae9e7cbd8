package agent

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ironflow/ironflow/agent/client"
)

// imageServer serves files; cutAfter > 0 makes the first full GET drop the
// connection after that many bytes (later Range requests are honoured).
type imageServer struct {
	*httptest.Server
	files    map[string][]byte
	cutAfter int64
	cuts     atomic.Int32
	ranges   atomic.Int32
}

func newImageServer(t *testing.T, files map[string][]byte) *imageServer {
	s := &imageServer{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := s.files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Range") != "" {
			s.ranges.Add(1)
		}
		if s.cutAfter > 0 && r.Header.Get("Range") == "" && s.cuts.Add(1) == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.WriteHeader(200)
			w.Write(data[:s.cutAfter])
			w.(http.Flusher).Flush()
			// Drop the connection mid-body.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

// testImage returns a small MBR disk image with recognisable content.
func testImage(size int) []byte {
	img := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img {
		img[i] = byte(r.Uint32())
	}
	// MBR with one Linux partition from 1 MiB to the end.
	clear(img[446:512])
	img[446+4] = 0x83
	putLE32(img[446+8:], 2048)
	putLE32(img[446+12:], uint32(size/512-2048))
	img[510], img[511] = 0x55, 0xaa
	return img
}

func putLE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func hexsum(h interface{ Sum([]byte) []byte }) string { return hex.EncodeToString(h.Sum(nil)) }

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func runWriteImage(t *testing.T, c *client.Client, args map[string]any, node map[string]any) (client.CommandResult, error) {
	t.Helper()
	ctx := context.Background()
	r, err := c.ExecuteDeployStep(ctx, client.Step{Step: "write_image", Interface: "deploy", Priority: 80, Args: args}, node, nil)
	if err != nil {
		return r, err
	}
	return c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
}

func readDisk(t *testing.T, hw *fileHardware, n int) []byte {
	b, err := os.ReadFile(hw.path(0))
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func TestWriteImageChecksumForms(t *testing.T) {
	img := testImage(3 << 20)
	s5 := sha512.Sum512(img)
	m5 := md5.Sum(img)
	sha512hex, md5hex, sha256h := hex.EncodeToString(s5[:]), hex.EncodeToString(m5[:]), sha256hex(img)
	files := map[string][]byte{
		"disk.img":   img,
		"SHA256SUMS": []byte("0000000000000000000000000000000000000000000000000000000000000000  other.img\n" + sha256h + " *disk.img\n"),
		"single.sum": []byte(sha512hex + "\n"),
		"BSD.sum":    []byte("SHA256 (disk.img) = " + sha256h + "\n"),
		"wrong.sum":  []byte(sha256h + "  not-this.img\n"),
	}
	srv := newImageServer(t, files)
	url := srv.URL + "/disk.img"
	cases := []struct {
		name    string
		args    map[string]any
		node    map[string]any
		wantErr string
	}{
		{"os_hash sha512", map[string]any{"image_source": url, "image_os_hash_algo": "sha512", "image_os_hash_value": sha512hex}, nil, ""},
		{"ipa standby names", map[string]any{"image_info": map[string]any{"urls": []any{url}, "os_hash_algo": "sha256", "os_hash_value": sha256h}}, nil, ""},
		{"bare sha256", map[string]any{"image_source": url, "image_checksum": sha256h}, nil, ""},
		{"bare sha512", map[string]any{"image_source": url, "checksum": sha512hex}, nil, ""},
		{"bare md5", map[string]any{"image_source": url, "image_checksum": md5hex}, nil, ""},
		{"from instance_info", nil, map[string]any{"instance_info": map[string]any{"image_source": url, "image_checksum": sha256h}}, ""},
		{"checksum URL", map[string]any{"image_source": url, "image_checksum": srv.URL + "/SHA256SUMS"}, nil, ""},
		{"checksum URL single", map[string]any{"image_source": url, "image_checksum": srv.URL + "/single.sum"}, nil, ""},
		{"checksum URL BSD", map[string]any{"image_source": url, "image_checksum": srv.URL + "/BSD.sum"}, nil, ""},
		{"checksum URL no entry", map[string]any{"image_source": url, "image_checksum": srv.URL + "/wrong.sum"}, nil, `no entry for "disk.img"`},
		{"no checksum", map[string]any{"image_source": url}, nil, "has no checksum"},
		{"declared qcow2, raw content", map[string]any{"image_source": url, "image_checksum": sha256h, "image_disk_format": "qcow2"}, nil, "image_disk_format is qcow2 but the image is raw"},
		{"vmdk format", map[string]any{"image_source": url, "image_checksum": sha256h, "image_disk_format": "vmdk"}, nil, "raw images"},
		{"missing image", map[string]any{"image_source": srv.URL + "/nope", "image_checksum": sha256h}, nil, "HTTP 404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			hw := newFileHardware(t, 16<<20)
			_, c := startAgent(t, api, hw, nil)
			r, err := runWriteImage(t, c, tc.args, tc.node)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readDisk(t, hw, len(img)), img) {
				t.Fatal("disk content differs from the image")
			}
			p, ok := r.Progress()
			if !ok || p.BytesWritten != int64(len(img)) {
				t.Fatalf("progress %+v %v", p, ok)
			}
		})
	}
}

func TestWriteImageResumesWithRange(t *testing.T) {
	img := testImage(5 << 20)
	srv := newImageServer(t, map[string][]byte{"disk.img": img})
	srv.cutAfter = 1<<20 + 12345
	api := newFakeAPI(t)
	hw := newFileHardware(t, 16<<20)
	_, c := startAgent(t, api, hw, nil)
	r, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.img", "image_checksum": sha256hex(img)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.ranges.Load() < 1 {
		t.Fatal("the download restarted instead of resuming with Range")
	}
	if srv.cuts.Load() != 1 {
		t.Fatalf("%d full GETs, want 1", srv.cuts.Load())
	}
	if !bytes.Equal(readDisk(t, hw, len(img)), img) {
		t.Fatal("disk content differs after a resumed download")
	}
	_ = r
}

func TestWriteImageCorruptWipes(t *testing.T) {
	img := testImage(4 << 20)
	srv := newImageServer(t, map[string][]byte{"disk.img": img})
	api := newFakeAPI(t)
	hw := newFileHardware(t, 16<<20)
	// Something bootable-looking at the end of the disk before the write.
	f, _ := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	f.WriteAt(bytes.Repeat([]byte{0xee}, 4096), 16<<20-4096)
	f.Close()
	_, c := startAgent(t, api, hw, nil)
	wrong := sha256hex(append([]byte("x"), img...))
	_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.img", "image_checksum": wrong}, nil)
	if err == nil {
		t.Fatal("corrupt image accepted")
	}
	for _, want := range []string{"checksum mismatch", "sha256", "expected " + wrong, "got " + sha256hex(img)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	disk, _ := os.ReadFile(hw.path(0))
	if !bytes.Equal(disk[:1<<20], make([]byte, 1<<20)) || !bytes.Equal(disk[len(disk)-1<<20:], make([]byte, 1<<20)) {
		t.Fatal("first and last MiB were not wiped after the checksum failure")
	}
}

func TestWriteImageCompressed(t *testing.T) {
	img := testImage(3 << 20)
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(img)
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(img)
	zw.Close()
	for _, tc := range []struct {
		name, file string
		data       []byte
		cut        int64
	}{
		{"gzip", "disk.img.gz", gz.Bytes(), 0},
		{"zstd", "disk.img.zst", zs.Bytes(), 0},
		// The decompressor keeps its state across a resumed connection.
		{"gzip", "disk.img.gz", gz.Bytes(), int64(gz.Len() / 3)},
		{"zstd", "disk.img.zst", zs.Bytes(), int64(zs.Len() / 2)},
	} {
		t.Run(fmt.Sprintf("%s cut at %d", tc.name, tc.cut), func(t *testing.T) {
			srv := newImageServer(t, map[string][]byte{"disk.img.gz": gz.Bytes(), "disk.img.zst": zs.Bytes()})
			srv.cutAfter = tc.cut
			api := newFakeAPI(t)
			hw := newFileHardware(t, 16<<20)
			_, c := startAgent(t, api, hw, nil)
			// The checksum is of the file as served (compressed).
			r, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/" + tc.file, "image_checksum": sha256hex(tc.data)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readDisk(t, hw, len(img)), img) {
				t.Fatal("decompressed content differs")
			}
			if !strings.Contains(string(r.CommandResult), `"image_format":"`+tc.name+`"`) {
				t.Fatalf("result %s", r.CommandResult)
			}
			if tc.cut > 0 && srv.ranges.Load() == 0 {
				t.Fatal("the compressed download was not resumed with Range")
			}
		})
	}
}

func TestWriteImageRefusesCorruptQcow2Content(t *testing.T) {
	img := append([]byte{'Q', 'F', 'I', 0xfb}, make([]byte, 1<<20)...)
	srv := newImageServer(t, map[string][]byte{"disk.qcow2": img})
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 16<<20), nil)
	_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.qcow2", "image_checksum": sha256hex(img)}, nil)
	if err == nil || !strings.Contains(err.Error(), "qcow2") || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("want qcow2 refusal, got %v", err)
	}
}

func TestWriteImageProgressWhileRunning(t *testing.T) {
	img := testImage(8 << 20)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(img)))
		for off := 0; off < len(img); off += 1 << 20 {
			w.Write(img[off : off+1<<20])
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	}))
	t.Cleanup(slow.Close)
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 16<<20), nil)
	ctx := context.Background()
	r, err := c.ExecuteDeployStep(ctx, client.Step{Step: "write_image", Args: map[string]any{"image_source": slow.URL + "/x", "image_checksum": sha256hex(img)}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []client.Progress
	_, err = c.WaitCommand(ctx, r.ID, 50*time.Millisecond, func(cr client.CommandResult) {
		if p, ok := cr.Progress(); ok {
			seen = append(seen, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1].TotalBytes != int64(len(img)) {
		t.Fatalf("no progress while running: %+v", seen)
	}
}

func TestChecksumFileParse(t *testing.T) {
	_, err := parseChecksumFile(strings.NewReader("abc  x.img\n"), "y.img", "f")
	if err == nil {
		t.Fatal("matched a wrong name")
	}
	v, err := parseChecksumFile(strings.NewReader("# comment\nABCDEF01  ./dir/y.img\n"), "y.img", "f")
	if err != nil || v != "ABCDEF01" {
		t.Fatal(v, err)
	}
	if _, err := algoForLength("abc"); err == nil {
		t.Fatal("odd length accepted")
	}
	_ = errors.New
	_ = hexsum
}
