package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWriteImageSendsTheRequestAuthorization: image_request_authorization
// (base64 of an Authorization header's value, as Ironic sends a registry's
// bearer token for a direct oci:// download) is sent with the image's URL
// only, never with the checksum file, the config drive or a redirect, and
// never shown in the agent's command list.
func TestWriteImageSendsTheRequestAuthorization(t *testing.T) {
	img := testImage(2 << 20)
	sum := sha256hex(img)
	const token = "Bearer short-lived-registry-token"
	var mu sync.Mutex
	seen := map[string]string{}
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["storage"+r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(img))
	}))
	t.Cleanup(storage.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		switch r.URL.Path {
		case "/v2/os/disk/blobs/sha256:" + sum:
			if r.Header.Get("Authorization") != token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(img))
		case "/v2/os/redirected":
			if r.Header.Get("Authorization") != token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, storage.URL+"/bucket/disk", http.StatusTemporaryRedirect)
		case "/SHA256SUMS":
			w.Write([]byte(sum + "  sha256:" + sum + "\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	authz := base64.StdEncoding.EncodeToString([]byte(token))

	for _, c := range []struct {
		name, path, checksum string
		wantErr              string
		authz                string
	}{
		{"with the token", "/v2/os/disk/blobs/sha256:" + sum, sum, "", authz},
		{"a checksum file fetched without it", "/v2/os/disk/blobs/sha256:" + sum, srv.URL + "/SHA256SUMS", "", authz},
		{"a redirect to storage gets no token", "/v2/os/redirected", sum, "", authz},
		{"without the token", "/v2/os/disk/blobs/sha256:" + sum, sum, "401", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			clear(seen)
			mu.Unlock()
			hw := newFileHardware(t, 16<<20)
			_, cl := startAgent(t, newFakeAPI(t), hw, func(cfg *Config) { cfg.Download.Retries = 0 })
			args := map[string]any{"image_source": srv.URL + c.path, "image_checksum": c.checksum}
			if c.authz != "" {
				args["image_request_authorization"] = c.authz
			}
			_, err := runWriteImage(t, cl, args, nil)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readDisk(t, hw, len(img)), img) {
				t.Fatal("the disk differs from the image")
			}
			mu.Lock()
			defer mu.Unlock()
			if got := seen[c.path]; got != token {
				t.Errorf("the image's URL was fetched with Authorization %q, want the token", got)
			}
			if got, ok := seen["/SHA256SUMS"]; ok && got != "" {
				t.Errorf("the checksum file was fetched with Authorization %q", got)
			}
			if got, ok := seen["storage/bucket/disk"]; ok && got != "" {
				t.Errorf("the redirect's target got Authorization %q", got)
			}
			cmds, err := cl.ListCommands(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(cmds)
			if strings.Contains(string(b), authz) || strings.Contains(string(b), "short-lived-registry-token") {
				t.Errorf("the command list shows the token: %s", b)
			}
		})
	}
}
