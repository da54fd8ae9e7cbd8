package pxe

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

const (
	sbNode = "3a7c9e1b-5d2f-4a6c-8b0e-9f1d3c5a7e02"
	sbMAC  = "52:54:00:5b:99:01"
)

// A UEFI PXE ROM of a node with secure boot on gets shim, not iPXE.
func TestDHCPOffersShimToASecureBootNode(t *testing.T) {
	b := testBackend(t)
	if err := b.Put(BootConfig{NodeUUID: sbNode, MACs: []string{sbMAC}, BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent",
		KernelURL: testHTTPURL + "/k", InitrdURL: testHTTPURL + "/i", SecureBoot: true}); err != nil {
		t.Fatal(err)
	}
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), b, NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := h.Handle(context.Background(), packet(t, dhcpv4.MessageTypeDiscover, sbMAC, ovmfPXE))
	if reply == nil || reply.BootFileName != DefaultSecureBootFile || !reply.ServerIPAddr.Equal(net.ParseIP(testServer)) {
		t.Fatalf("secure boot node: reply %v, want boot file %s from %s", reply, DefaultSecureBootFile, testServer)
	}
	// The same node with secure boot off gets iPXE as before.
	bc, _ := b.BootConfigByNode(context.Background(), sbNode)
	bc.SecureBoot = false
	b.Put(*bc)
	if reply, _ := h.Handle(context.Background(), packet(t, dhcpv4.MessageTypeDiscover, sbMAC, ovmfPXE)); reply == nil || reply.BootFileName != DefaultUEFIBootFile {
		t.Fatalf("secure boot off: reply %v, want %s", reply, DefaultUEFIBootFile)
	}
}

// The TFTP service serves the chain: shim and signed GRUB from their
// files, the master grub.cfg, the node's config by its MAC, and the
// node's kernel and initrd streamed from the boot config's URLs; nothing
// for a MAC without a boot config.
func TestTFTPServesTheSecureBootChain(t *testing.T) {
	kernel, initrd := bytes.Repeat([]byte("kernel"), 3000), bytes.Repeat([]byte("initrd"), 5000)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/images/vmlinuz":
			w.Write(kernel)
		case "/images/initrd":
			w.Write(initrd)
		default:
			http.NotFound(w, r)
		}
	}))
	defer web.Close()
	dir := t.TempDir()
	shim, grub := filepath.Join(dir, "shim.signed"), filepath.Join(dir, "grubnet.signed")
	os.WriteFile(shim, []byte("MZ shim"), 0o644)
	os.WriteFile(grub, []byte("MZ grub"), 0o644)
	b := NewMemoryBackend()
	b.Put(BootConfig{NodeUUID: sbNode, MACs: []string{sbMAC}, BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent",
		KernelURL: web.URL + "/images/vmlinuz", InitrdURL: web.URL + "/images/initrd", KernelParams: "console=ttyS0 ipa-api-url=http://10.99.0.1:6385",
		SecureBoot: true})
	srv, err := NewTFTPServer(TFTPConfig{Root: dir, Shim: shim, SignedNetGrub: grub}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.ServeBootConfigs(b)
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, conn); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	addr := conn.LocalAddr().String()

	for name, want := range map[string][]byte{
		"shimx64.efi":                       []byte("MZ shim"),
		"grubx64.efi":                       []byte("MZ grub"),
		"grub/grub.cfg":                     []byte(grubMaster),
		"ironflow/" + sbMAC + "/kernel":     kernel,
		"ironflow/" + sbMAC + "/initrd":     initrd,
		"ironflow/52:54:00:5B:99:01/kernel": kernel,
	} {
		got, err := tftpGet(addr, name, 1024)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	cfg, err := tftpGet(addr, "grub/ironflow/"+sbMAC+".cfg", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"linux /ironflow/" + sbMAC + "/kernel console=ttyS0 ipa-api-url=http://10.99.0.1:6385 BOOTIF=01-52-54-00-5b-99-01\n",
		"initrd /ironflow/" + sbMAC + "/initrd\n",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("node config %q lacks %q", cfg, want)
		}
	}
	if !strings.Contains(grubMaster, "configfile /grub/ironflow/${net_default_mac}.cfg") {
		t.Errorf("master config %q does not read the node's by MAC", grubMaster)
	}
	if _, err := tftpGet(addr, "/"+filepath.Base(shim), 0); err == nil {
		t.Errorf("an absolute path outside the chain was served")
	}
	for _, name := range []string{"grub/ironflow/../../shim.signed", "ironflow/../shim.signed/kernel", "grub/ironflow/52:54:00:00:00:99.cfg", "ironflow/52:54:00:00:00:99/kernel", "grub/ironflow/not-a-mac.cfg"} {
		if _, err := tftpGet(addr, name, 0); err == nil {
			t.Errorf("%s served for a MAC ironflow was not asked to boot", name)
		}
	}
}

func TestGRUBConfigRefusesParamsGRUBWouldInterpret(t *testing.T) {
	mac, _ := net.ParseMAC(sbMAC)
	for _, p := range []string{"a=$(x)", "x; reboot", "a={b}", `quote"`} {
		if _, err := RenderGRUBConfig(BootConfig{KernelParams: p}, mac); err == nil {
			t.Errorf("params %q accepted", p)
		}
	}
}
