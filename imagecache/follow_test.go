package imagecache

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gatedOrigin sends the first half of an image, then waits for release
// before it sends the rest.
func gatedOrigin(t *testing.T, img []byte) (Source, chan struct{}) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		half := len(img) / 2
		w.Write(img[:half])
		w.(http.Flusher).Flush()
		<-release
		w.Write(img[half:])
	}))
	t.Cleanup(srv.Close)
	sum := sha512.Sum512(img)
	return Source{Key: "test:gated", Algo: "sha512", Hash: hex.EncodeToString(sum[:]), Size: int64(len(img)),
		Fetch: func(ctx context.Context) (io.ReadCloser, error) {
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			return resp.Body, nil
		}}, release
}

func followServer(t *testing.T, c *Cache, src Source) *httptest.Server {
	s := &Server{Cache: c, Resolve: func(context.Context, string) (Source, error) { return src, nil }}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Image(w, r, strings.Trim(strings.TrimSuffix(r.URL.Path, "/image"), "/"))
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestFirstRequestIsServedWhileTheCacheDownloads: the first node to ask
// for an image not yet cached gets its bytes as the origin sends them,
// not after the whole download; the last byte only once the cache has
// verified the image, which is then cached for the next.
func TestFirstRequestIsServedWhileTheCacheDownloads(t *testing.T) {
	img := randBytes(4 << 20)
	src, release := gatedOrigin(t, img)
	c, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	hs := followServer(t, c, src)
	resp, err := http.Get(hs.URL + "/n1/image")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(img)) {
		t.Fatalf("first answer %s, length %d; want 200 with the image's %d bytes", resp.Status, resp.ContentLength, len(img))
	}
	// Half the image arrives while the origin holds back the rest.
	half := make([]byte, len(img)/2-1)
	if _, err := io.ReadFull(resp.Body, half); err != nil {
		t.Fatalf("read the first half while the origin waits: %v", err)
	}
	if !bytes.Equal(half, img[:len(half)]) {
		t.Fatal("the first half differs from the image")
	}
	if c.Has(src.Key) {
		t.Fatal("the image is cached before the origin sent all of it")
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(half, rest...); !bytes.Equal(got, img) {
		t.Fatalf("streamed %d bytes differing from the image's %d", len(got), len(img))
	}
	if !c.Has(src.Key) || c.Downloads.Load() != 1 {
		t.Fatalf("after the stream: cached %v, %d downloads; want cached, 1", c.Has(src.Key), c.Downloads.Load())
	}
	// The next node: from the cache, no new download.
	if code, b := get(t, hs.URL+"/n2/image"); code != 200 || !bytes.Equal(b, img) || c.Downloads.Load() != 1 {
		t.Fatalf("second node: %d, %d bytes, %d downloads", code, len(b), c.Downloads.Load())
	}
}

// TestAStreamedImageFailingItsChecksumNeverEnds: a download that does not
// match its checksum breaks the stream before its last byte, so that no
// client sees a complete image; a resume is refused with the reason.
func TestAStreamedImageFailingItsChecksumNeverEnds(t *testing.T) {
	img := randBytes(2 << 20)
	src, release := gatedOrigin(t, img)
	src.Hash = strings.Repeat("0", 128)
	c, _ := Open(t.TempDir(), 0)
	hs := followServer(t, c, src)
	// Every byte is on the cache's disk, the follower has caught up with
	// them, and only then is the image found wrong.
	testHookDownloaded = func() { time.Sleep(200 * time.Millisecond) }
	t.Cleanup(func() { testHookDownloaded = nil })
	resp, err := http.Get(hs.URL + "/n1/image")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("first answer %s, want 200 (streamed)", resp.Status)
	}
	close(release)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(b) >= len(img) {
		t.Fatalf("read %d of %d bytes, err %v: want a broken stream short of the end", len(b), len(img), err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("the stream ended with %v", err)
	}
	if c.Has(src.Key) {
		t.Fatal("a mismatching image was kept")
	}
	code, body := get(t, hs.URL+"/n1/image", "Range", "bytes="+itoa(len(b))+"-")
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "checksum") {
		t.Fatalf("resume: %d %s, want 422 naming the checksum", code, body)
	}
	// The resume, and another node's request, get the reason without a
	// second download of the bad bytes.
	if code, _ := get(t, hs.URL+"/n2/image"); code != http.StatusUnprocessableEntity || c.Downloads.Load() != 1 {
		t.Fatalf("another node: %d after %d downloads, want 422 from the one download", code, c.Downloads.Load())
	}
}

// TestTwoFollowersShareOneDownload: nodes asking while the download runs
// both follow it.
func TestTwoFollowersShareOneDownload(t *testing.T) {
	img := randBytes(3 << 20)
	src, release := gatedOrigin(t, img)
	c, _ := Open(t.TempDir(), 0)
	hs := followServer(t, c, src)
	type result struct {
		b   []byte
		err error
	}
	results := make(chan result, 2)
	for _, n := range []string{"n1", "n2"} {
		go func() {
			resp, err := http.Get(hs.URL + "/" + n + "/image")
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results <- result{b, err}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	for range 2 {
		r := <-results
		if r.err != nil || !bytes.Equal(r.b, img) {
			t.Fatalf("a follower got %d bytes, %v", len(r.b), r.err)
		}
	}
	if n := c.Downloads.Load(); n != 1 {
		t.Fatalf("%d downloads for two nodes, want 1", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestATruncatedDownloadIsNotCached: an origin that closes the connection
// short of its Content-Length fails the download (the hashing copy tells
// a broken body from the end of the image).
func TestATruncatedDownloadIsNotCached(t *testing.T) {
	img := randBytes(3 << 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img)))
		w.Write(img[:len(img)-12345])
	}))
	t.Cleanup(srv.Close)
	sum := sha512.Sum512(img)
	src := Source{Key: "test:truncated", Algo: "sha512", Hash: hex.EncodeToString(sum[:]), Size: int64(len(img)),
		Fetch: func(ctx context.Context) (io.ReadCloser, error) {
			resp, err := http.Get(srv.URL)
			if err != nil {
				return nil, err
			}
			return resp.Body, nil
		}}
	c, _ := Open(t.TempDir(), 0)
	_, err := c.Acquire(context.Background(), src)
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") || c.Has(src.Key) {
		t.Fatalf("a truncated download: %v, cached %v; want the broken body's error, nothing cached", err, c.Has(src.Key))
	}
}
