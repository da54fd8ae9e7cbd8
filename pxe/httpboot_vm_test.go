package pxe

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
)

// ovmfHTTPBootOnly are OVMF's fw_cfg switches that drop its PXE boot
// options (IPv4 and IPv6), leaving UEFI HTTP boot.
var ovmfHTTPBootOnly = []string{
	"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
	"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
}

// helperHTTPS is the lab's HTTPS listener: the boot service's handler
// with a certificate for the lab's address.
type helperHTTPS struct {
	Addr, CertFile, KeyFile string
}

// serveHTTPS runs the HTTP boot handler over TLS until ctx ends.
func serveHTTPS(t *testing.T, ctx context.Context, c helperHTTPS, cfg HTTPConfig, backend NodeBackend, log *slog.Logger) {
	h, err := NewHTTPHandler(cfg, backend, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Addr: c.Addr, Handler: h, TLSConfig: firmwareTLSConfig()}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, c.CertFile, c.KeyFile)
	context.AfterFunc(ctx, func() { srv.Close() })
}

// writeLabCert writes a self-signed RSA certificate for the lab's address
// (EDK2 checks the server's address against it) and returns the cert and
// key files.
func writeLabCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, _ = selfsigned.WriteRSA(t, "ironflow lab boot service", labAddr)
	return certFile, keyFile
}

// TestNetbootQEMU_UEFIHTTPSBootIPXE boots a node whose boot interface is
// http-ipxe on OVMF with no TFTP server in the lab, its loader over HTTPS:
// DHCP answers the firmware's UEFI HTTP boot with snponly.efi's https URL,
// OVMF trusts the boot service's certificate through fw_cfg
// etc/edk2/https/cacerts (EDK2CACerts) and fetches it over TLS
// (FirmwareTLSCipherSuites), iPXE gets the node's script, the kernel and
// initrd come over HTTP (Debian's iPXE has no HTTPS). The plain HTTP
// chain is the e2e test TestDeployUEFIHTTPBootWithoutTFTP's.
func TestNetbootQEMU_UEFIHTTPSBootIPXE(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b17", "52:54:00:99:16:02"
	certFile, keyFile := writeLabCert(t)
	pemData, _ := os.ReadFile(certFile)
	cacerts, err := EDK2CACerts(pemData)
	if err != nil {
		t.Fatal(err)
	}
	cacertsFile := filepath.Join(dir, "cacerts.bin")
	if err := os.WriteFile(cacertsFile, cacerts, 0o644); err != nil {
		t.Fatal(err)
	}
	bc := labBootConfig(node, mac, BootModeUEFI)
	bc.Method = MethodHTTPIPXE
	bc.LoaderURL = "https://" + labAddr + ":8443" + LoaderPath(DefaultHTTPIPXELoader)
	l := newLabWith(t, dir, func(c *helperConfig) {
		c.Config.TFTP = nil
		c.HTTPS = &helperHTTPS{Addr: labAddr + ":8443", CertFile: certFile, KeyFile: keyFile}
	}, bc)
	// romfile= drops the NIC's iPXE option ROM, which would otherwise
	// boot first and hide the firmware's own HTTP boot. OVMF's PXE boot
	// options are turned off as a machine set to boot UEFI HTTP only is:
	// each would wait out its DHCP timeouts (about 2.5 min under TCG)
	// before the HTTP boot option runs.
	args := append(ovmfArgs(t, dir), ovmfHTTPBootOnly...)
	args = append(args, "-fw_cfg", "name=etc/edk2/https/cacerts,file="+cacertsFile,
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns}, args...)
	assertBooted(t, console, "ipa-api-url="+labAPIURL, "ipa-node-uuid="+node)
	logs := l.serviceLog()
	if !logLine(logs, `"msg":"boot file offered"`, `"http_boot":true`, `"file":"`+bc.LoaderURL+`"`) {
		t.Errorf("DHCP never offered the loader's URL to a UEFI HTTP boot client")
	}
	if !logLine(logs, `"method":"GET"`, `"path":"/loaders/snponly.efi"`, `"status":200`) {
		t.Errorf("the firmware never fetched snponly.efi")
	}
	if !strings.Contains(logs, "/boot/"+node+"/boot.ipxe") {
		t.Errorf("the node's iPXE script was never fetched")
	}
	if strings.Contains(logs, "TFTP") {
		t.Errorf("the lab ran a TFTP service")
	}
	if !strings.Contains(console, "URI: "+bc.LoaderURL) {
		t.Errorf("the firmware did not boot the HTTPS URI %s", bc.LoaderURL)
	}
}

func firmwareTLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: FirmwareTLSCipherSuites()}
}
