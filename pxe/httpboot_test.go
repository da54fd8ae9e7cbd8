package pxe

import (
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

const (
	httpNode   = "8f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e16"
	httpMAC    = "52:54:00:aa:bb:16"
	httpLoader = testHTTPURL + "/loaders/snponly.efi"
)

// UEFI HTTP boot clients as OVMF sends them: option 60 "HTTPClient:...",
// option 93 = 16 (x86-64 HTTP) or 19 (arm64 HTTP).
var (
	ovmfHTTP  = clientShape{class: "HTTPClient:Arch:00016:UNDI:003000", arch: []byte{0, 16}}
	arm64HTTP = clientShape{class: "HTTPClient:Arch:00019:UNDI:003000", arch: []byte{0, 19}}
	ia32HTTP  = clientShape{class: "HTTPClient:Arch:00015:UNDI:003000", arch: []byte{0, 15}}
)

func httpBootBackend(t *testing.T) *MemoryBackend {
	b := testBackend(t)
	if err := b.Put(BootConfig{NodeUUID: httpNode, MACs: []string{httpMAC}, BootMode: BootModeUEFI, Method: MethodHTTPIPXE, Kind: "agent",
		KernelURL: testHTTPURL + "/images/vmlinuz", InitrdURL: testHTTPURL + "/images/initrd", LoaderURL: httpLoader}); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDHCPHTTPBoot(t *testing.T) {
	script := testHTTPURL + "/boot/" + httpNode + "/boot.ipxe"
	cases := []struct {
		name     string
		mac      string
		shape    clientShape
		wantFile string // "" with an HTTPClient wantClass: none
		class    string // option 60 of the reply; "" for none
		// proxy: whether the ProxyDHCP answers at all.
		proxyAnswers bool
	}{
		{name: "HTTP client of an http-ipxe node gets the loader URL", mac: httpMAC, shape: ovmfHTTP,
			wantFile: httpLoader, class: httpClientClass, proxyAnswers: true},
		{name: "arm64 HTTP client gets the node's loader URL", mac: httpMAC, shape: arm64HTTP,
			wantFile: httpLoader, class: httpClientClass, proxyAnswers: true},
		{name: "iPXE loaded over HTTP gets the node's script", mac: httpMAC, shape: efiIPXE,
			wantFile: script, class: pxeClientClass, proxyAnswers: true},
		{name: "PXE client of an http-ipxe node gets no boot file", mac: httpMAC, shape: ovmfPXE},
		{name: "HTTP client of an architecture without loader gets no boot file", mac: httpMAC, shape: ia32HTTP},
		{name: "HTTP client of a PXE node gets no boot file", mac: testMAC, shape: ovmfHTTP},
		{name: "HTTP client of a virtual media node gets no boot file", mac: testVMMAC, shape: ovmfHTTP},
	}
	for _, mode := range []string{DHCPModeReservation, DHCPModeProxy} {
		var leases Leases
		if mode == DHCPModeReservation {
			leases = NewMemoryLeases()
		}
		h, err := NewDHCPHandler(testDHCPConfig(mode), httpBootBackend(t), leases, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				want := dhcpv4.MessageTypeOffer
				if mode == DHCPModeProxy && !tc.proxyAnswers {
					want = dhcpv4.MessageTypeNone
				}
				reply, _ := handleExpect(t, h, packet(t, dhcpv4.MessageTypeDiscover, tc.mac, tc.shape), want)
				if reply == nil {
					return
				}
				if reply.BootFileName != tc.wantFile || reply.BootFileNameOption() != tc.wantFile {
					t.Errorf("file %q, option 67 %q; want %q", reply.BootFileName, reply.BootFileNameOption(), tc.wantFile)
				}
				if got := reply.ClassIdentifier(); got != tc.class {
					t.Errorf("option 60 %q, want %q", got, tc.class)
				}
				if tc.class == httpClientClass && reply.TFTPServerName() != "" {
					t.Errorf("UEFI HTTP boot offer names a TFTP server %q", reply.TFTPServerName())
				}
				if mode == DHCPModeReservation && !isSet(reply.YourIPAddr) {
					t.Errorf("reservation offer without an address: %s", reply.Summary())
				}
				if _, err := dhcpv4.FromBytes(reply.ToBytes()); err != nil {
					t.Errorf("reply does not decode: %v", err)
				}
			})
		}
	}
}

func TestHTTPLoaders(t *testing.T) {
	dir := t.TempDir()
	loader := []byte("MZ fake EFI loader")
	os.WriteFile(filepath.Join(dir, "snponly.efi"), loader, 0o644)
	os.WriteFile(filepath.Join(dir, "ipxe.lkrn"), []byte("not a UEFI loader"), 0o644)
	os.WriteFile(filepath.Join(dir, "..", "secret.efi"), []byte("outside"), 0o644)
	os.Symlink(filepath.Join(dir, "..", "secret.efi"), filepath.Join(dir, "escape.efi"))
	h, err := NewHTTPHandler(HTTPConfig{LoadersDir: dir}, testBackend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	srv := ts.URL
	resp, err := http.Get(srv + "/loaders/snponly.efi")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/efi" || resp.ContentLength != int64(len(loader)) {
		t.Errorf("snponly.efi: status %d, type %q, length %d", resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength)
	}
	for _, p := range []string{"/loaders/ipxe.lkrn", "/loaders/ipxe.efi", "/loaders/..%2fsecret.efi", "/loaders/escape.efi", "/loaders/"} {
		if code, _ := get(t, srv+p); code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, code)
		}
	}
}

// TestEDK2CACerts: one EFI_SIGNATURE_LIST of EFI_CERT_X509_GUID per PEM
// certificate, its sizes consistent and the DER certificate at its end;
// a file without certificates is refused.
func TestEDK2CACerts(t *testing.T) {
	c1, _ := writeLabCert(t)
	one, _ := os.ReadFile(c1)
	c2, _ := writeLabCert(t)
	two, _ := os.ReadFile(c2)
	b, err := EDK2CACerts(append(append([]byte("# a comment\n"), one...), two...))
	if err != nil {
		t.Fatal(err)
	}
	var ders [][]byte
	for rest := b; len(rest) > 0; {
		if len(rest) < 28 || !bytes.Equal(rest[:16], efiCertX509GUID[:]) {
			t.Fatalf("list %d: no EFI_CERT_X509_GUID header: % x", len(ders), rest[:min(len(rest), 28)])
		}
		listSize := binary.LittleEndian.Uint32(rest[16:])
		hdrSize := binary.LittleEndian.Uint32(rest[20:])
		sigSize := binary.LittleEndian.Uint32(rest[24:])
		if hdrSize != 0 || listSize != 28+sigSize || int(listSize) > len(rest) {
			t.Fatalf("list %d: sizes list %d header %d signature %d of %d bytes", len(ders), listSize, hdrSize, sigSize, len(rest))
		}
		der := rest[28+16 : listSize]
		if _, err := x509.ParseCertificate(der); err != nil {
			t.Fatalf("list %d: %v", len(ders), err)
		}
		ders = append(ders, der)
		rest = rest[listSize:]
	}
	if len(ders) != 2 {
		t.Errorf("%d lists, want 2", len(ders))
	}
	if _, err := EDK2CACerts([]byte("not PEM")); err == nil {
		t.Errorf("a file without certificates was encoded")
	}
}
