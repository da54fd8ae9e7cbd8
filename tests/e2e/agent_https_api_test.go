package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/ironflow/ironflow/embedded"
)

// TestAgentCallsBackOverHTTPSAPI runs the API with --tls-cert/--tls-key
// (a CA made here) and the agent's --agent-api-url https://…, the boot
// service on plain HTTP as docs/security.md recommends. The agent trusts
// what its ramdisk's CA bundle holds (/etc/ssl/certs/ca-certificates.crt,
// `mkramdisk -ca-bundle`); here the bundle is replaced by a second newc
// archive appended to the initramfs, which the kernel unpacks over the
// first. With another CA in the bundle the agent refuses the API's
// certificate, never calls back, and the deploy fails with the callback
// timeout; with the API's CA the same node deploys and boots its disk.
// The refused deploy's callback timeout is the node's own
// (driver_info/deploy_callback_timeout, docs/configuration.md), short so
// that the test does not idle through the service's; the trusted deploy
// runs under the service's.
func TestAgentCallsBackOverHTTPSAPI(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := newStack(t, lab)
	dir := t.TempDir()
	apiCA, apiCAKey := testCA(t, "ironflow e2e API CA")
	otherCA, _ := testCA(t, "ironflow e2e other CA")
	certFile, keyFile := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	caFile := filepath.Join(dir, "ca.crt")
	serverCert(t, apiCA, apiCAKey, net.ParseIP(LabAddress), certFile, keyFile)
	if err := os.WriteFile(caFile, pemCert(apiCA), 0o644); err != nil {
		t.Fatal(err)
	}
	s.apiCA = caFile
	orig, err := os.ReadFile(filepath.Join(s.imagesDir, "agent.initramfs"))
	if err != nil {
		t.Fatal(err)
	}
	trusting := func(ca *x509.Certificate) {
		t.Helper()
		img := append(append([]byte(nil), orig...), caBundleArchive(t, pemCert(ca))...)
		tmp := filepath.Join(s.imagesDir, ".agent.initramfs.tmp")
		if err := os.WriteFile(tmp, img, 0o644); err != nil {
			t.Fatal(err)
		}
		// A rename, so that a hard link to `make ramdisk`'s output is
		// replaced, never written through.
		if err := os.Rename(tmp, filepath.Join(s.imagesDir, "agent.initramfs")); err != nil {
			t.Fatal(err)
		}
	}
	trusting(otherCA)

	// callbackTimeout is the service's; refusedCallbackTimeout the node's
	// for the refused deploy: it must outlast the agent's boot to its
	// refused lookup (36 s from the deploy's start on the 2-core machine
	// at load 15; the test logs it).
	const callbackTimeout = 10 * time.Minute
	const refusedCallbackTimeout = 90 * time.Second
	args := []string{s.bin, "dev",
		"--data-dir", s.dataDir,
		"--listen", apiListen,
		"--tls-cert", certFile, "--tls-key", keyFile,
		"--agent-api-url", "https://" + apiListen,
		"--boot-url", "http://" + bootListen,
		"--temporal-port", temporalPort,
		"--temporal-ui-port", "-1",
		"--agent-insecure",
		"--deploy-callback-timeout", callbackTimeout.String(),
	}
	dev := lab.Start("ironflow-dev", []string{"IRONFLOW_TEMPORAL_BIN=" + temporalCLI()}, append(args, s.bootFlags()...)...)
	s.procs = append(s.procs, dev)
	waitHTTPS(t, s, "https://"+apiListen+"/v1", caFile)
	// The API speaks HTTPS only.
	if res, err := labHTTPClient(lab).Get("http://" + apiListen + "/v1"); err == nil {
		res.Body.Close()
		if res.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS API: %s, want it refused", res.Status)
		}
	}

	vm := lab.AddVM("node-tls", "52:54:00:e2:5a:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-tls", "disk.raw"))
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	uuid := createIPMINode(t, s, vm, "e2e-tls", password, "--deploy-interface", "direct", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)

	// The wrong CA: the agent refuses the API, the node fails by timeout.
	s.mustCLI(t, "node", "set", uuid, "--driver-info", "deploy_callback_timeout="+seconds(refusedCallbackTimeout))
	begin := time.Now()
	refused := make(chan struct{})
	go func() {
		// For the log: when the agent's refused lookup shows, against
		// refusedCallbackTimeout.
		ctx, cancel := context.WithTimeout(context.Background(), refusedCallbackTimeout+5*time.Minute)
		defer cancel()
		if _, err := WaitSerial(ctx, vm.SerialLog, "lookup failed", refused); err == nil {
			t.Logf("untrusted API: the agent's lookup failed %.0fs after the deploy began (node's callback timeout %s)",
				time.Since(begin).Seconds(), refusedCallbackTimeout)
		}
	}()
	_, err = s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(refusedCallbackTimeout+5*time.Minute))
	close(refused)
	if err == nil {
		t.Fatalf("deploy with an agent that does not trust the API's CA reached active\n%s", s.logTail())
	}
	f := s.nodeFields(t, uuid)
	lastErr, _ := f["last_error"].(string)
	if f["provision_state"] != "deploy failed" || !strings.Contains(lastErr, "Timeout reached while waiting for callback for node "+uuid) {
		t.Fatalf("after the agent refused the API: %v, last_error %q; want deploy failed by the callback timeout\n%s\nVM console tail:\n%s",
			f["provision_state"], lastErr, s.logTail(), embedded.Tail(vm.SerialLog, 3000))
	}
	console, _ := os.ReadFile(vm.SerialLog)
	if !bytes.Contains(console, []byte("lookup failed")) || !bytes.Contains(console, []byte("x509")) {
		t.Fatalf("the agent's console does not show the refused certificate:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
	t.Logf("untrusted API: deploy failed after %.0fs: %s", time.Since(begin).Seconds(), lastErr)

	// The API's CA: the same node deploys over HTTPS call-backs, under
	// the service's callback timeout again.
	trusting(apiCA)
	s.mustCLI(t, "node", "unset", uuid, "--driver-info", "deploy_callback_timeout")
	begin = time.Now()
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Etlsapi e2e"
	s.deploy(t, uuid, vm, "e2e-tls", pubKey)
	t.Logf("trusted API: deploy reached active in %.0fs", time.Since(begin).Seconds())
	waitBootedFromDisk(t, vm, "e2e-tls", pubKey)
}

// waitHTTPS waits for url to answer over TLS verified against caFile.
func waitHTTPS(t *testing.T, s *stack, url, caFile string) {
	t.Helper()
	pool := x509.NewCertPool()
	pemData, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(pemData) {
		t.Fatalf("CA %s: %v", caFile, err)
	}
	c := labHTTPClient(s.lab)
	tr := c.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.Transport = tr
	deadline := time.Now().Add(stackReadyTimeout)
	for {
		res, err := c.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				t.Logf("stack: ironflow dev up: API %s (TLS), boot http://%s", url, bootListen)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("API %s not up over TLS: %v\n%s", url, err, s.logTail())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// caBundleArchive is a gzipped newc archive holding only
// etc/ssl/certs/ca-certificates.crt = bundle.
func caBundleArchive(t *testing.T, bundle []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(writeNewc([]newcEntry{
		{name: "etc", mode: modeDir | 0o755},
		{name: "etc/ssl", mode: modeDir | 0o755},
		{name: "etc/ssl/certs", mode: modeDir | 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: modeReg | 0o644, data: bundle},
	})); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func testCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// serverCert writes a certificate for ip signed by ca, and its key.
func serverCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, ip net.IP, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{ip}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
