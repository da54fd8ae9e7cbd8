package oci_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/ironflow/ironflow/internal/testkit/registry"
	"github.com/ironflow/ironflow/oci"
)

func trusting(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 20 * time.Second}
}

func wantError(t *testing.T, reg *registry.Registry, err error, kind oci.ErrorKind, text string) {
	t.Helper()
	if err == nil || oci.KindOf(err) != kind || !strings.Contains(err.Error(), text) {
		t.Fatalf("error %v (kind %d), want kind %d with %q", err, oci.KindOf(err), kind, text)
	}
	if strings.Contains(err.Error(), reg.Password) {
		t.Fatalf("error shows the password: %v", err)
	}
}

// TestRegistry resolves and fetches images from Debian's docker-registry
// (TLS, htpasswd) holding a multi-architecture index in Ironic's layout.
func TestRegistry(t *testing.T) {
	reg := registry.Start(t)
	ctx := context.Background()
	qcow := bytes.Repeat([]byte("QFI\xfb amd64 qcow2 "), 1000)
	raw := bytes.Repeat([]byte("amd64 raw "), 1000)
	arm := bytes.Repeat([]byte("arm64 qcow2 "), 1000)
	p := reg.PushIndex(t, "ironflow/disk", []string{"1.0", "stable"},
		registry.Disk{Arch: "amd64", DiskType: "qemu", MediaType: "application/octet-stream", Title: "disk.x86_64.qcow2", Data: qcow},
		registry.Disk{Arch: "x86_64", DiskType: "raw", MediaType: "application/octet-stream", Title: "disk.x86_64.raw", Data: raw},
		registry.Disk{Arch: "arm64", DiskType: "qemu", MediaType: "application/zstd", Title: "disk.aarch64.qcow2.zst", Data: arm},
		registry.Disk{Arch: "amd64", MediaType: ocispec.MediaTypeImageLayerGzip, Layers: [][]byte{[]byte("a"), []byte("b")}},
	)
	base := "oci://" + reg.Host + "/ironflow/disk"
	good := oci.Options{Credential: oci.Credential{Username: reg.User, Password: reg.Password}, HTTPClient: trusting(reg.CAPEM), CPUArch: "x86_64"}

	t.Run("tag, qcow2 first for local", func(t *testing.T) {
		o := good
		o.DownloadSource = "local"
		img, err := oci.Resolve(ctx, base+":1.0", o)
		if err != nil {
			t.Fatal(err)
		}
		if img.Layer != p.Layers[0].String() || img.DiskFormat != "qcow2" || img.Manifest.Digest != p.Manifests[0].String() || img.Filename != "disk.x86_64.qcow2" || img.Size != int64(len(qcow)) {
			t.Fatalf("resolved %+v, want the amd64 qcow2 layer %s", img, p.Layers[0])
		}
		rc, err := oci.Open(ctx, img, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(b, qcow) {
			t.Fatalf("layer: %d bytes, not the qcow2 pushed", len(b))
		}
	})
	t.Run("tag, raw first otherwise", func(t *testing.T) {
		img, err := oci.Resolve(ctx, base+":stable", good)
		if err != nil || img.Layer != p.Layers[1].String() || img.DiskFormat != "raw" {
			t.Fatalf("resolved %+v, %v; want the raw layer %s", img, err, p.Layers[1])
		}
	})
	t.Run("arm64, zstd", func(t *testing.T) {
		o := good
		o.CPUArch = "aarch64"
		img, err := oci.Resolve(ctx, base+":1.0", o)
		if err != nil || img.Layer != p.Layers[2].String() || img.Compression != "zstd" {
			t.Fatalf("resolved %+v, %v; want the arm64 layer", img, err)
		}
	})
	t.Run("by manifest digest", func(t *testing.T) {
		img, err := oci.Resolve(ctx, base+"@"+p.Manifests[1].String(), good)
		if err != nil || img.Layer != p.Layers[1].String() || img.Manifest.Digest != p.Manifests[1].String() {
			t.Fatalf("resolved %+v, %v; want layer %s", img, err, p.Layers[1])
		}
	})
	t.Run("by index digest", func(t *testing.T) {
		img, err := oci.Resolve(ctx, base+"@"+p.Index.String(), good)
		if err != nil || img.Layer != p.Layers[1].String() {
			t.Fatalf("resolved %+v, %v; want layer %s", img, err, p.Layers[1])
		}
	})
	wantErr := func(t *testing.T, err error, kind oci.ErrorKind, text string) {
		t.Helper()
		wantError(t, reg, err, kind, text)
	}
	t.Run("missing architecture", func(t *testing.T) {
		o := good
		o.CPUArch = "ppc64le"
		_, err := oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrInvalid, "has no disk image for architecture ppc64le")
	})
	t.Run("wrong digest", func(t *testing.T) {
		_, err := oci.Resolve(ctx, base+"@sha256:"+strings.Repeat("0", 64), good)
		wantErr(t, err, oci.ErrNotFound, "Image "+base+"@sha256:"+strings.Repeat("0", 64)+" could not be found.")
	})
	t.Run("unknown tag", func(t *testing.T) {
		_, err := oci.Resolve(ctx, base+":2.0", good)
		wantErr(t, err, oci.ErrNotFound, "Image tag "+base+":2.0 could not be found, available tags are 1.0, stable")
	})
	t.Run("bad pull secret", func(t *testing.T) {
		o := good
		o.Credential = oci.PullSecret(reg.User + ":wrong")
		_, err := oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrAuth, "requires authentication which has not been provided")
	})
	t.Run("no pull secret", func(t *testing.T) {
		o := good
		o.Credential = oci.Credential{}
		_, err := oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrAuth, "requires authentication which has not been provided")
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		o := good
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second}
		_, err := oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrInvalid, "TLS certificate is not trusted")
	})
	t.Run("oversized index", func(t *testing.T) {
		o := good
		o.MaxMetadata = 512
		_, err := oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrInvalid, "ironflow reads")
	})
	t.Run("unknown media type", func(t *testing.T) {
		reg.PushIndex(t, "ironflow/odd", []string{"1"},
			registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/vnd.example.archive+xz", Data: []byte("xz")})
		_, err := oci.Resolve(ctx, "oci://"+reg.Host+"/ironflow/odd:1", good)
		wantErr(t, err, oci.ErrInvalid, `not a disk image`)
	})
	t.Run("conductor-wide auth file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "config.json")
		auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + reg.Password))
		if err := os.WriteFile(f, []byte(`{"auths": {"`+reg.Host+`": {"auth": "`+auth+`"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		oci.AuthFile = f
		defer func() { oci.AuthFile = "" }()
		o := good
		var err error
		if o.Credential, err = oci.NodeCredential(nil, nil, reg.Host); err != nil {
			t.Fatal(err)
		}
		if _, err := oci.Resolve(ctx, base+":1.0", o); err != nil {
			t.Fatalf("with the auth file's credential: %v", err)
		}
		// The node's pull secret wins over the file.
		if o.Credential, err = oci.NodeCredential(map[string]any{"image_pull_secret": reg.User + ":wrong"}, nil, reg.Host); err != nil {
			t.Fatal(err)
		}
		_, err = oci.Resolve(ctx, base+":1.0", o)
		wantErr(t, err, oci.ErrAuth, "requires authentication")
	})
	t.Run("registry down", func(t *testing.T) {
		_, err := oci.Resolve(ctx, "oci://127.0.0.1:1/ironflow/disk:1.0", good)
		wantErr(t, err, oci.ErrUnavailable, "Resource temporarily unavailable")
	})
	t.Run("direct download refused with basic auth", func(t *testing.T) {
		img, err := oci.Resolve(ctx, base+":1.0", good)
		if err != nil {
			t.Fatal(err)
		}
		d, err := oci.DirectAccess(ctx, img, good)
		wantErr(t, err, oci.ErrInvalid, "image_download_source=direct: the registry takes the pull secret itself (basic auth)")
		if d.Authorization != "" || strings.Contains(err.Error(), reg.Password) {
			t.Fatalf("refused direct access handed out %q / %v", d.Authorization, err)
		}
	})
}

// TestRegistryTokenAuth resolves an image from Debian's docker-registry
// configured for token authentication (bearer tokens from a token
// service), and hands an agent the blob's URL with a short-lived bearer
// token that fetches the layer, never the pull secret itself.
func TestRegistryTokenAuth(t *testing.T) {
	reg := registry.StartTokenAuth(t)
	ctx := context.Background()
	raw := bytes.Repeat([]byte("amd64 raw by token "), 2000)
	p := reg.PushIndex(t, "ironflow/disk", []string{"1.0"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: raw})
	base := "oci://" + reg.Host + "/ironflow/disk"
	o := oci.Options{Credential: oci.Credential{Username: reg.User, Password: reg.Password}, HTTPClient: trusting(reg.CAPEM), CPUArch: "x86_64"}
	img, err := oci.Resolve(ctx, base+":1.0", o)
	if err != nil {
		t.Fatal(err)
	}
	if img.Layer != p.Layers[0].String() {
		t.Fatalf("resolved layer %s, want %s", img.Layer, p.Layers[0])
	}
	before := len(reg.Tokens.IssuedTokens())
	d, err := oci.DirectAccess(ctx, img, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://" + reg.Host + "/v2/ironflow/disk/blobs/" + img.Layer; d.URL != want {
		t.Fatalf("direct URL %s, want %s", d.URL, want)
	}
	issued := reg.Tokens.IssuedTokens()
	if len(issued) <= before {
		t.Fatal("DirectAccess asked the token service for no token")
	}
	last := issued[len(issued)-1]
	if d.Authorization != "Bearer "+last.Token || !strings.Contains(strings.Join(last.Scopes, " "), "repository:ironflow/disk:pull") {
		t.Fatalf("authorization %.20q..., want the bearer token issued for pulling ironflow/disk (scopes %v)", d.Authorization, last.Scopes)
	}
	if ttl := time.Until(last.Expires); ttl > reg.Tokens.Lifetime {
		t.Fatalf("the token lives %s, longer than the service's %s", ttl, reg.Tokens.Lifetime)
	}
	if strings.Contains(d.Authorization, reg.Password) || strings.Contains(fmt.Sprint(d), "Bearer") {
		t.Fatalf("the direct access carries the pull secret, or prints its token: %v", d)
	}
	// What the agent does: a GET of the URL with the header alone.
	get := func(authz string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := trusting(reg.CAPEM).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get(d.Authorization); code != 200 || !bytes.Equal(b, raw) {
		t.Fatalf("GET with the token: %d, %d bytes; want 200 and the layer's %d", code, len(b), len(raw))
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("GET without the token: %d, want 401 (the registry is not open)", code)
	}
	// The token is for that repository only.
	other := reg.PushIndex(t, "ironflow/other", []string{"1"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: []byte("other")})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+reg.Host+"/v2/ironflow/other/blobs/"+other.Layers[0].String(), nil)
	req.Header.Set("Authorization", d.Authorization)
	resp, err := trusting(reg.CAPEM).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the token fetched another repository's blob: %d", resp.StatusCode)
	}
	// A wrong pull secret gets no token: Ironic's authentication text.
	bad := o
	bad.Credential.Password = "wrong"
	_, err = oci.Resolve(ctx, base+":1.0", bad)
	wantError(t, reg, err, oci.ErrAuth, "requires authentication")
}
