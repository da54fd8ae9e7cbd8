package agent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A checksums file that is not ready yet (the image cache answers once it
// has the image) is fetched again as the image would be, not given up on.
func TestChecksumFileIsRetriedWhileItsServerIsNotReady(t *testing.T) {
	img := testImage(2 << 20)
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/image":
			w.Write(img)
		case "/checksum":
			if asked.Add(1) <= 2 {
				http.Error(w, "converting", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(sha256hex(img) + "  image\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	hw := newFileHardware(t, 16<<20)
	_, c := startAgent(t, newFakeAPI(t), hw, nil)
	if _, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/image", "image_checksum": srv.URL + "/checksum"}, nil); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 3 || !bytes.Equal(readDisk(t, hw, len(img)), img) {
		t.Fatalf("checksum asked %d times", asked.Load())
	}
	// A 4xx is final, with the server's reason.
	_, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/image", "image_checksum": srv.URL + "/missing"}, nil)
	if err == nil || !strings.Contains(err.Error(), "checksum file: download "+srv.URL+"/missing") {
		t.Fatalf("a missing checksum file: %v", err)
	}
}
