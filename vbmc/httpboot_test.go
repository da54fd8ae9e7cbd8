package vbmc

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
)

// TestHTTPBootArgs: http_boot drops the NIC's iPXE option ROM and OVMF's
// PXE boot options, leaving the firmware's UEFI HTTP boot; a VM without it
// keeps both; http_boot on a BIOS VM is refused.
func TestHTTPBootArgs(t *testing.T) {
	cfg := Config{StateDir: "/tmp/x", Password: "p", VMs: []VM{
		{Name: "pxe", MAC: "52:54:00:00:00:20", Firmware: FirmwareUEFI},
		{Name: "http", MAC: "52:54:00:00:00:21", Firmware: FirmwareUEFI, HTTPBoot: true},
	}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	off := []string{"romfile=", "opt/org.tianocore/IPv4PXESupport,string=n", "opt/org.tianocore/IPv6PXESupport,string=n"}
	pxe := strings.Join(newMachine(&cfg, cfg.VMs[0], slog.Default()).qemuArgs(nil, ""), " ")
	http := strings.Join(newMachine(&cfg, cfg.VMs[1], slog.Default()).qemuArgs(nil, ""), " ")
	for _, a := range off {
		if strings.Contains(pxe, a) {
			t.Errorf("a PXE VM has %q:\n%s", a, pxe)
		}
		if !strings.Contains(http, a) {
			t.Errorf("an http_boot VM lacks %q:\n%s", a, http)
		}
	}
	bad := Config{StateDir: "/tmp/x", Password: "p", VMs: []VM{{Name: "b", MAC: "52:54:00:00:00:22", HTTPBoot: true}}}
	if err := bad.normalize(); err == nil || !strings.Contains(err.Error(), "http_boot needs firmware") {
		t.Errorf("http_boot on a BIOS VM: %v, want refused", err)
	}
}

// TestHTTPSCACertsArgs: https_cacerts hands OVMF the CAs as fw_cfg
// etc/edk2/https/cacerts; a file without certificates is refused.
func TestHTTPSCACertsArgs(t *testing.T) {
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "ca.pem")
	certFile, _, _ := selfsigned.Write(t, "boot")
	b, _ := os.ReadFile(certFile)
	os.WriteFile(pemFile, b, 0o644)
	cfg := Config{StateDir: dir, Password: "p", VMs: []VM{{Name: "https", MAC: "52:54:00:00:00:23", Firmware: FirmwareUEFI, HTTPSCACerts: pemFile}}}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	args := strings.Join(newMachine(&cfg, cfg.VMs[0], slog.Default()).qemuArgs(nil, ""), " ")
	if want := "-fw_cfg name=etc/edk2/https/cacerts,file=" + filepath.Join(dir, "https", "https-cacerts.bin"); !strings.Contains(args, want) {
		t.Errorf("args lack %q:\n%s", want, args)
	}
	os.WriteFile(pemFile, []byte("no certificate"), 0o644)
	bad := Config{StateDir: dir, Password: "p", VMs: []VM{{Name: "b", MAC: "52:54:00:00:00:24", Firmware: FirmwareUEFI, HTTPSCACerts: pemFile}}}
	if err := bad.normalize(); err == nil || !strings.Contains(err.Error(), "https_cacerts") {
		t.Errorf("https_cacerts without certificates: %v, want refused", err)
	}
}
