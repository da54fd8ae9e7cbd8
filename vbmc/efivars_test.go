package vbmc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
)

// setHTTPBootNext on Debian's OVMF variable stores (the empty one and the
// one with Microsoft's keys enrolled, whose authenticated variables it
// must keep): Boot0100 holds the URI's load option and BootNext names it;
// a second call leaves one valid copy of each, the first ones deleted;
// nothing outside the variable region changes.
func TestSetHTTPBootNextInOVMFVariableStores(t *testing.T) {
	for _, src := range []string{OVMFVars, OVMFSecureVars} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			orig, err := os.ReadFile(src)
			if err != nil {
				t.Skipf("SKIP: OVMF's variable store is not installed (Debian package ovmf): %v", err)
			}
			path := filepath.Join(t.TempDir(), "vars.fd")
			if err := os.WriteFile(path, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := parseVariableStore(bytes.Clone(orig))
			if err != nil {
				t.Fatal(err)
			}
			vsBefore, _, err := before.variables()
			if err != nil {
				t.Fatal(err)
			}
			for _, uri := range []string{"http://10.0.2.2:8080/first.iso", "http://[fd77::1]:8080/iso/agent.iso"} {
				if err := setHTTPBootNext(path, uri); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(orig) {
				t.Fatalf("the file went from %d to %d bytes", len(orig), len(got))
			}
			s, err := parseVariableStore(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[s.end:], orig[s.end:]) || !bytes.Equal(got[:s.start], orig[:s.start]) {
				t.Error("bytes outside the variable region changed")
			}
			vs, _, err := s.variables()
			if err != nil {
				t.Fatal(err)
			}
			valid := map[string]int{}
			for i, v := range vs {
				if i < len(vsBefore) && (v.name != vsBefore[i].name || !bytes.Equal(v.data, vsBefore[i].data)) {
					t.Errorf("variable %d (%s) changed", i, vsBefore[i].name)
				}
				if v.state == varAdded {
					valid[v.name]++
				}
			}
			if valid["Boot0100"] != 1 || valid["BootNext"] != 1 {
				t.Errorf("valid copies: %v, want one Boot0100 and one BootNext", valid)
			}
			next, ok, err := s.get("BootNext")
			if err != nil || !ok || binary.LittleEndian.Uint16(next) != 0x0100 {
				t.Errorf("BootNext %x (%v, %v), want 0x0100", next, ok, err)
			}
			opt, ok, err := s.get("Boot0100")
			if err != nil || !ok {
				t.Fatalf("Boot0100: %v, %v", ok, err)
			}
			if want := uriLoadOption("UEFI HTTP boot from the BMC", "http://[fd77::1]:8080/iso/agent.iso"); !bytes.Equal(opt, want) {
				t.Errorf("Boot0100 %x, want %x", opt, want)
			}
		})
	}
	if err := setHTTPBootNext(filepath.Join(t.TempDir(), "absent.fd"), "http://x/"); err == nil {
		t.Error("a missing variable file was accepted")
	}
	junk := filepath.Join(t.TempDir(), "junk.fd")
	os.WriteFile(junk, make([]byte, 4096), 0o644)
	if err := setHTTPBootNext(junk, "http://x/"); err == nil || !strings.Contains(err.Error(), "not a firmware volume") {
		t.Errorf("a file that is no variable store: %v", err)
	}
}

// efiBootISO is an ISO whose El Torito EFI image boots iPXE (Debian's
// snponly.efi as \EFI\BOOT\BOOTX64.EFI): what a firmware runs tells that
// it booted the ISO.
func efiBootISO(t *testing.T, dir string) string {
	t.Helper()
	requireTools(t, "xorriso", "mkfs.vfat", "mmd", "mcopy")
	const loader = "/usr/lib/ipxe/snponly.efi"
	if _, err := os.Stat(loader); err != nil {
		t.Skipf("SKIP: %s is not installed (Debian package ipxe): %v", loader, err)
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	img := filepath.Join(src, "efiboot.img")
	iso := filepath.Join(dir, "www", "boot.iso")
	os.MkdirAll(filepath.Dir(iso), 0o755)
	for _, c := range [][]string{
		{"dd", "if=/dev/zero", "of=" + img, "bs=1k", "count=1440"},
		{"mkfs.vfat", img},
		{"mmd", "-i", img, "::/EFI", "::/EFI/BOOT"},
		{"mcopy", "-i", img, loader, "::/EFI/BOOT/BOOTX64.EFI"},
		{"xorriso", "-as", "mkisofs", "-o", iso, "-e", "efiboot.img", "-no-emul-boot", src},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return iso
}

// A UEFI VM told through Redfish to boot once from a URI (UefiHttp with
// Boot.HttpBootUri) fetches that URI with its own firmware: OVMF gets an
// address from QEMU's user network (whose DHCP names no boot file), and
// downloads and boots the ISO served on this host's loopback (the VM
// reaches it at 10.0.2.2), which starts iPXE. The override reads back
// with its URI; a Legacy VM refuses UefiHttp.
func TestRedfishUefiHttpBootsTheURI(t *testing.T) {
	requireTools(t, DefaultQEMUBinary, "qemu-img", "pgrep")
	if _, err := os.Stat(OVMFCode); err != nil {
		t.Skipf("SKIP: OVMF is not installed (Debian package ovmf): %v", err)
	}
	dir := t.TempDir()
	iso := efiBootISO(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fetched []string
	files := http.FileServer(http.Dir(filepath.Dir(iso)))
	isoSrv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched = append(fetched, r.Method+" "+r.URL.Path)
		mu.Unlock()
		files.ServeHTTP(w, r)
	})}}
	isoSrv.Start()
	t.Cleanup(isoSrv.Close)
	uri := fmt.Sprintf("http://10.0.2.2:%d/boot.iso", l.Addr().(*net.TCPAddr).Port)

	cfg := newTestConfigWith(t, func(top, vm map[string]any) {
		// TCG, as TestUEFIConsoleAppends: OVMF under KVM is not every
		// host's (KVM stops some UEFI guests with an internal error).
		top["accel"] = AccelTCG
		vm["firmware"] = FirmwareUEFI
		vm["netdev"] = "user"
		vm["memory_mb"] = 512
		vm["http_boot"] = true
	})
	srv, ts := serveRedfish(t, cfg)
	t.Cleanup(func() { srv.machines["vm0"].ForceOff(context.Background()) })
	client, err := gofish.Connect(gofish.ClientConfig{Endpoint: ts.URL, Username: "admin", Password: "password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Logout)

	system := getSystem(t, client)
	if err := system.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.UefiHTTPBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled, HTTPBootURI: uri}); err != nil {
		t.Fatalf("set UefiHttp with HttpBootUri: %v", err)
	}
	if b := getSystem(t, client).Boot; b.BootSourceOverrideTarget != redfish.UefiHTTPBootSourceOverrideTarget || b.HTTPBootURI != uri {
		t.Errorf("boot override reads back as %s %q, want UefiHttp %q", b.BootSourceOverrideTarget, b.HTTPBootURI, uri)
	}
	if err := getSystem(t, client).Reset(redfish.OnResetType); err != nil {
		t.Fatal(err)
	}
	serial := cfg.VMs[0].SerialLog
	waitLogContains(t, serial, "URI: "+uri)
	waitLogContains(t, serial, "iPXE initialising devices")
	mu.Lock()
	if !strings.Contains(strings.Join(fetched, ","), "GET /boot.iso") {
		t.Errorf("the ISO server saw %v, want a GET of /boot.iso", fetched)
	}
	mu.Unlock()

	_, lts := serveRedfish(t, newTestConfig(t))
	lc, err := gofish.Connect(gofish.ClientConfig{Endpoint: lts.URL, Username: "admin", Password: "password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Logout)
	if err := getSystem(t, lc).SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.UefiHTTPBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled, HTTPBootURI: uri}); err == nil || !strings.Contains(err.Error(), "Legacy") {
		t.Errorf("UefiHttp on a Legacy VM: %v, want refused", err)
	}
}
