// Package registry runs Debian's docker-registry (the CNCF distribution
// server 2.8) on loopback, with TLS and htpasswd auth (or, with
// StartTokenAuth, the distribution token authentication of a token
// service the package runs), for the tests of oci:// image sources
// (docs/oci-images.md), and pushes disk images to it in Ironic's layout.
package registry

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// T is what the package needs of a test: testing.TB has it, and the
// benchmark (internal/bench, part oci) passes its own.
type T interface {
	Helper()
	Skipf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Binary is where Debian's docker-registry package installs the server.
const Binary = "/usr/bin/docker-registry"

// Registry is a running registry.
type Registry struct {
	Host           string // 127.0.0.1:port
	User, Password string
	CAPEM          []byte // the CA that signed the registry's certificate
	Dir            string
	Log            *bytes.Buffer
	cmd            *exec.Cmd
	client         *http.Client
	// Tokens is the token service of a registry started by
	// StartTokenAuth; nil for htpasswd auth.
	Tokens *TokenService
}

// Start runs a registry for the test, stopped at its end. It skips, loudly,
// when Debian's docker-registry is not installed (scripts/install-deps.sh
// test installs it).
func Start(t T) *Registry { return StartFor(t) }

// StartFor is Start with a certificate valid for ips too (a lab address a
// proxy forwards to the registry).
func StartFor(t T, ips ...net.IP) *Registry { return start(t, false, ips) }

// StartTokenAuth is Start with the registry's token authentication (the
// distribution spec's "Token Authentication Specification", as Docker
// Hub, Quay and Harbor speak it): the registry answers 401 with a bearer
// challenge naming the package's token service, which hands the test's
// user short-lived tokens (TokenService.Lifetime) for the scopes asked.
func StartTokenAuth(t T) *Registry { return start(t, true, nil) }

func start(t T, tokenAuth bool, ips []net.IP) *Registry {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("SKIPPED: %s is absent (Debian's docker-registry; scripts/install-deps.sh test installs it)", Binary)
	}
	dir := t.TempDir()
	r := &Registry{User: "puller", Password: "s3cret-pull", Dir: dir, Log: &bytes.Buffer{}}
	caPEM, certPEM, keyPEM := certs(t, ips)
	r.CAPEM = caPEM
	must(t, os.WriteFile(filepath.Join(dir, "cert.pem"), append(certPEM, caPEM...), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600))
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(r.User+":"+string(hash)+"\n"), 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r.Host = l.Addr().String()
	l.Close()
	authCfg := fmt.Sprintf(`  htpasswd:
    realm: ironflow-test
    path: %s
`, filepath.Join(dir, "htpasswd"))
	if tokenAuth {
		r.Tokens = startTokenService(t, r, certPEM, keyPEM)
		authCfg = r.Tokens.config(dir)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
%s`, filepath.Join(dir, "data"), r.Host, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), authCfg)
	must(t, os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600))
	r.cmd = exec.Command(Binary, "serve", filepath.Join(dir, "config.yml"))
	r.cmd.Stdout, r.cmd.Stderr = r.Log, r.Log
	must(t, r.cmd.Start())
	t.Cleanup(r.Stop)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	r.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := r.client.Get("https://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry did not come up on %s: %v\n%s", r.Host, err, r.Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r
}

// Stop ends the registry.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// Client trusts the registry's CA.
func (r *Registry) Client() *http.Client { return r.client }

func (r *Registry) repo(t T, name string) *remote.Repository {
	t.Helper()
	repo, err := remote.NewRepository(r.Host + "/" + name)
	must(t, err)
	repo.Client = &auth.Client{Client: r.client, Cache: auth.NewCache(),
		Credential: auth.StaticCredential(r.Host, auth.Credential{Username: r.User, Password: r.Password})}
	return repo
}

// Disk is one entry of an image index in Ironic's layout.
type Disk struct {
	Arch      string // platform.architecture
	DiskType  string // the disktype annotation ("" for none)
	MediaType string // the layer's media type
	Title     string // org.opencontainers.image.title
	Data      []byte
	// Layers, when set, replaces the one layer (a container image, which
	// Ironic skips).
	Layers [][]byte
}

// Pushed is what a push made.
type Pushed struct {
	Index     digest.Digest   // the index (or the manifest, for PushManifest)
	Manifests []digest.Digest // one per Disk
	Layers    []digest.Digest
}

// PushIndex pushes disks as Ironic's layout has them and tags the index:
// each disk an artifact manifest with the empty config and one layer
// titled with its file name, listed in an OCI image index whose entries
// carry platform.architecture and a disktype annotation. The layout is
// that of podman's machine-os images, which Ironic's unit tests capture
// (Ironic's ironic/tests/unit/common/test_image_service.py,
// OciImageServiceTestCase.setUp's artifact_index, and the manifest
// test_identify_specific_image_local fetches), read there and written here
// independently of ironflow's oci package.
func (r *Registry) PushIndex(t T, repoName string, tags []string, disks ...Disk) Pushed {
	t.Helper()
	ctx := context.Background()
	repo := r.repo(t, repoName)
	empty := r.pushBlob(t, repo, ocispec.MediaTypeEmptyJSON, []byte("{}"))
	var p Pushed
	var entries []ocispec.Descriptor
	for _, d := range disks {
		m, layers := r.pushManifest(t, repo, empty, d)
		p.Manifests = append(p.Manifests, m.Digest)
		p.Layers = append(p.Layers, layers...)
		m.Platform = &ocispec.Platform{Architecture: d.Arch, OS: "linux"}
		if d.DiskType != "" {
			m.Annotations = map[string]string{"disktype": d.DiskType}
		}
		entries = append(entries, m)
	}
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: entries}
	b, err := json.Marshal(idx)
	must(t, err)
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(b), Size: int64(len(b))}
	must(t, repo.Push(ctx, desc, bytes.NewReader(b)))
	for _, tag := range tags {
		must(t, repo.Tag(ctx, desc, tag))
	}
	p.Index = desc.Digest
	return p
}

// PushRaw pushes b as a manifest of media type mt under tag (for bad
// manifests: oversized, unknown types).
func (r *Registry) PushRaw(t T, repoName, tag, mt string, b []byte) digest.Digest {
	t.Helper()
	repo := r.repo(t, repoName)
	desc := ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b))}
	must(t, repo.PushReference(context.Background(), desc, bytes.NewReader(b), tag))
	return desc.Digest
}

func (r *Registry) pushManifest(t T, repo *remote.Repository, empty ocispec.Descriptor, d Disk) (ocispec.Descriptor, []digest.Digest) {
	layers := d.Layers
	if layers == nil {
		layers = [][]byte{d.Data}
	}
	var descs []ocispec.Descriptor
	var ds []digest.Digest
	for _, l := range layers {
		ld := r.pushBlob(t, repo, d.MediaType, l)
		if d.Title != "" {
			ld.Annotations = map[string]string{ocispec.AnnotationTitle: d.Title}
		}
		descs = append(descs, ld)
		ds = append(ds, ld.Digest)
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: empty, Layers: descs}
	b, err := json.Marshal(m)
	must(t, err)
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(b), Size: int64(len(b))}
	must(t, repo.Push(context.Background(), desc, bytes.NewReader(b)))
	return desc, ds
}

func (r *Registry) pushBlob(t T, repo *remote.Repository, mt string, b []byte) ocispec.Descriptor {
	desc := ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if ok, err := repo.Exists(context.Background(), desc); err == nil && ok {
		return desc
	}
	must(t, repo.Push(context.Background(), desc, bytes.NewReader(b)))
	return desc
}

func certs(t T, ips []net.IP) (caPEM, certPEM, keyPEM []byte) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ironflow test registry CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...), DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	must(t, err)
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	must(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func must(t T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
