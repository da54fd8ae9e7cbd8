package imagecache

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// origin is an image server that counts the downloads it serves.
type origin struct {
	srv    *httptest.Server
	images map[string][]byte
	hits   atomic.Int64
	delay  time.Duration
}

func newOrigin(t *testing.T, images map[string][]byte) *origin {
	o := &origin{images: images}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		b, ok := o.images[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		time.Sleep(o.delay)
		w.Write(b)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) source(name string) Source {
	sum := sha512.Sum512(o.images[name])
	return Source{Key: "test:" + name, Algo: "sha512", Hash: hex.EncodeToString(sum[:]), Size: int64(len(o.images[name])),
		Fetch: func(ctx context.Context) (io.ReadCloser, error) {
			req, _ := http.NewRequestWithContext(ctx, "GET", o.srv.URL+"/"+name, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != 200 {
				resp.Body.Close()
				return nil, fmt.Errorf("origin: %s", resp.Status)
			}
			return resp.Body, nil
		}}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// serve puts a Server in front of the cache where node "n-<image>" deploys <image>.
func serve(t *testing.T, c *Cache, o *origin) (*Server, *httptest.Server) {
	s := &Server{Cache: c, Resolve: func(ctx context.Context, node string) (Source, error) {
		name, _ := strings.CutPrefix(node, "n-")
		name, _, _ = strings.Cut(name, ".")
		if _, ok := o.images[name]; !ok {
			return Source{}, errors.New("no such node")
		}
		return o.source(name), nil
	}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Image(w, r, strings.Trim(strings.TrimSuffix(r.URL.Path, "/image"), "/"))
	}))
	t.Cleanup(hs.Close)
	return s, hs
}

func get(t *testing.T, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestTenAgentsAtOnceCauseOneDownload(t *testing.T) {
	img := randBytes(3 << 20)
	o := newOrigin(t, map[string][]byte{"a": img})
	o.delay = 200 * time.Millisecond // all ten arrive while the download runs
	c, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, hs := serve(t, c, o)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("%s/n-a.%d/image", hs.URL, i))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !bytes.Equal(b, img) {
				errs <- fmt.Errorf("agent %d: %s, %d bytes", i, resp.Status, len(b))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := o.hits.Load(); n != 1 {
		t.Fatalf("origin served %d downloads for 10 concurrent agents, want 1", n)
	}
}

func TestRangeRequestsResume(t *testing.T) {
	img := randBytes(1 << 20)
	o := newOrigin(t, map[string][]byte{"a": img})
	c, _ := Open(t.TempDir(), 0)
	_, hs := serve(t, c, o)
	code, b := get(t, hs.URL+"/n-a/image", "Range", "bytes=1000-")
	if code != http.StatusPartialContent || !bytes.Equal(b, img[1000:]) {
		t.Fatalf("resume from byte 1000: %d, %d bytes", code, len(b))
	}
	code, b = get(t, hs.URL+"/n-a/image", "Range", "bytes=10-19")
	if code != http.StatusPartialContent || !bytes.Equal(b, img[10:20]) {
		t.Fatalf("bytes 10-19: %d %x", code, b)
	}
	if o.hits.Load() != 1 {
		t.Fatalf("origin hits %d, want 1", o.hits.Load())
	}
}

func TestCacheSmallerThanTwoImagesEvictsTheUnusedOneNotTheOneInUse(t *testing.T) {
	const size = 1 << 20
	o := newOrigin(t, map[string][]byte{"a": randBytes(size), "b": randBytes(size), "c": randBytes(size)})
	c, _ := Open(t.TempDir(), size*3/2)
	ctx := context.Background()

	// a is cached and then unused; b evicts it.
	ha, err := c.Acquire(ctx, o.source("a"))
	if err != nil {
		t.Fatal(err)
	}
	ha.Release()
	hb, err := c.Acquire(ctx, o.source("b"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Has("test:a") || !c.Has("test:b") {
		t.Fatalf("after b: a cached %v, b cached %v; want a evicted", c.Has("test:a"), c.Has("test:b"))
	}
	if c.Used() > size*3/2 {
		t.Fatalf("cache uses %d bytes, bound %d", c.Used(), size*3/2)
	}
	// b is in use (held): c does not fit and b stays.
	_, err = c.Acquire(ctx, o.source("c"))
	if !errors.Is(err, ErrFull) {
		t.Fatalf("c while b in use: %v, want ErrFull", err)
	}
	if !c.Has("test:b") {
		t.Fatal("the image in use was evicted")
	}
	if _, err := os.Stat(hb.Path()); err != nil {
		t.Fatalf("the file of the image in use: %v", err)
	}
	hb.Release()
	hc, err := c.Acquire(ctx, o.source("c"))
	if err != nil {
		t.Fatalf("c once b is released: %v", err)
	}
	hc.Release()
	if c.Has("test:b") {
		t.Fatal("b still cached after c needed its room")
	}
}

func TestAServedNodeHoldsItsImage(t *testing.T) {
	const size = 1 << 20
	o := newOrigin(t, map[string][]byte{"a": randBytes(size), "b": randBytes(size)})
	c, _ := Open(t.TempDir(), size*3/2)
	s, hs := serve(t, c, o)
	if code, _ := get(t, hs.URL+"/n-a/image"); code != 200 {
		t.Fatalf("a: %d", code)
	}
	// The agent of n-a is still deploying (its lease runs): b cannot evict a.
	if code, _ := get(t, hs.URL+"/n-b/image"); code != http.StatusInsufficientStorage {
		t.Fatalf("b while a is leased: %d, want 507", code)
	}
	if !c.Has("test:a") {
		t.Fatal("the image of a running deploy was evicted")
	}
	s.Release("n-a")
	if code, _ := get(t, hs.URL+"/n-b/image"); code != 200 {
		t.Fatalf("b after a's deploy ended: %d", code)
	}
}

func TestCorruptEntryIsDetectedAndRefetched(t *testing.T) {
	img := randBytes(1 << 20)
	o := newOrigin(t, map[string][]byte{"a": img})
	c, _ := Open(t.TempDir(), 0)
	h, err := c.Acquire(context.Background(), o.source("a"))
	if err != nil {
		t.Fatal(err)
	}
	path := h.Path()
	h.Release()
	// Flip a byte in place (the file's mtime moves with the write).
	time.Sleep(10 * time.Millisecond)
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt([]byte{img[500] ^ 0xff}, 500)
	f.Close()

	_, hs := serve(t, c, o)
	code, b := get(t, hs.URL+"/n-a/image")
	if code != 200 || !bytes.Equal(b, img) {
		t.Fatalf("after corruption: %d, equal %v", code, bytes.Equal(b, img))
	}
	if n := o.hits.Load(); n != 2 {
		t.Fatalf("origin hits %d, want 2 (the refetch)", n)
	}
}

func TestEntriesSurviveARestartAndAreVerified(t *testing.T) {
	img := randBytes(1 << 20)
	o := newOrigin(t, map[string][]byte{"a": img})
	dir := t.TempDir()
	c, _ := Open(dir, 0)
	h, err := c.Acquire(context.Background(), o.source("a"))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	c2, _ := Open(dir, 0)
	h, err = c2.Acquire(context.Background(), o.source("a"))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if o.hits.Load() != 1 {
		t.Fatalf("origin hits %d after a restart, want 1", o.hits.Load())
	}
}

func TestWrongChecksumFailsEveryWaiter(t *testing.T) {
	o := newOrigin(t, map[string][]byte{"a": randBytes(4096)})
	c, _ := Open(t.TempDir(), 0)
	src := o.source("a")
	src.Hash = strings.Repeat("0", 128)
	_, err := c.Acquire(context.Background(), src)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("err %v, want ErrChecksum", err)
	}
	if c.Has(src.Key) || c.Used() != 0 {
		t.Fatal("a mismatching image was kept")
	}
}

func TestProgressOfTheDownloadInFlight(t *testing.T) {
	img := randBytes(1 << 20)
	o := newOrigin(t, map[string][]byte{"a": img})
	o.delay = 500 * time.Millisecond
	c, _ := Open(t.TempDir(), 0)
	s, hs := serve(t, c, o)
	route := httptest.NewServer(s)
	defer route.Close()
	const node = "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11"
	s.Resolve = func(ctx context.Context, _ string) (Source, error) { return o.source("a"), nil }
	done := make(chan struct{})
	go func() { defer close(done); get(t, route.URL+"/cache/"+node+"/image") }()
	var rep ProgressReport
	deadline := time.Now().Add(5 * time.Second)
	for !rep.Downloading && time.Now().Before(deadline) {
		resp, err := http.Get(route.URL + "/cache/" + node + "/progress")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if !rep.Downloading || rep.Total != int64(len(img)) {
		t.Fatalf("progress while downloading: %+v", rep)
	}
	<-done
	resp, _ := http.Get(route.URL + "/cache/" + node + "/progress")
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if rep.Downloading {
		t.Fatalf("progress after the download: %+v", rep)
	}
	_ = hs
}

func TestCachedAndLocateOfPlainURLs(t *testing.T) {
	const id = "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11"
	for _, c := range []struct {
		ii   map[string]any
		want bool
	}{
		{map[string]any{"image_source": id}, true},
		{map[string]any{"image_source": "glance://" + id, "image_download_source": "direct"}, false},
		{map[string]any{"image_source": "http://x/disk.raw"}, false},
		{map[string]any{"image_source": "http://x/disk.raw", "image_download_source": "http"}, true},
	} {
		if got := Cached(c.ii); got != c.want {
			t.Errorf("Cached(%v) = %v", c.ii, got)
		}
	}
	o, ok, err := Locate(context.Background(), nil, map[string]any{"image_source": "http://x/disk.raw", "image_download_source": "http", "image_checksum": strings.Repeat("a", 64)})
	if err != nil || !ok || o.Algo != "sha256" || o.DownloadSource != DownloadHTTP {
		t.Fatalf("plain URL cached: %+v %v %v", o, ok, err)
	}
	if _, _, err := Locate(context.Background(), nil, map[string]any{"image_source": "http://x/disk.raw", "image_download_source": "http", "image_checksum": "http://x/disk.raw.sha256"}); err == nil {
		t.Fatal("a checksum URL was accepted for the cache")
	}
	if _, _, err := Locate(context.Background(), nil, map[string]any{"image_source": id}); !errors.Is(err, ErrNoGlance) {
		t.Fatalf("Glance image without Glance: %v", err)
	}
	if _, _, err := Locate(context.Background(), nil, map[string]any{"image_source": id, "image_download_source": "swift"}); err == nil {
		t.Fatal("image_download_source swift accepted")
	}
}

func TestAPlainURLIsCachedUnderAKeyThatHidesIt(t *testing.T) {
	img := randBytes(64 << 10)
	o := newOrigin(t, map[string][]byte{"a": img})
	sum := sha512.Sum512(img)
	url := o.srv.URL + "/a"
	org, ok, err := Locate(context.Background(), nil, map[string]any{"image_source": url, "image_download_source": "http",
		"image_os_hash_algo": "sha512", "image_os_hash_value": hex.EncodeToString(sum[:])})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	src := org.Source(nil, nil)
	if strings.Contains(src.Key, o.srv.URL) {
		t.Fatalf("key %q shows the URL", src.Key)
	}
	c, _ := Open(t.TempDir(), 0)
	h, err := c.Acquire(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if b, _ := os.ReadFile(h.Path()); !bytes.Equal(b, img) {
		t.Fatal("cached bytes differ")
	}
}
