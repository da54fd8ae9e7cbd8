package pxe

import (
	"context"
	"path/filepath"
	"testing"
)

func TestNetbootQEMU_AgentISO(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	kernel := testKernel(t)
	initrd := testInitramfs(t, dir)
	isos := AgentISOs{Dir: filepath.Join(dir, "isos")}
	const node = "5d2b3c1e-8a4f-4c6b-9e3d-2f1a0b9c8d7e"
	iso, err := isos.Build(context.Background(), kernel, initrd, ISOParams{
		NodeUUID:     node,
		APIURL:       "http://10.99.0.1:6385",
		AgentToken:   "tok-secret-123",
		KernelParams: "console=ttyS0",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) {
			vmDir := t.TempDir()
			args := []string{"-cdrom", iso, "-boot", "d"}
			if fw == "uefi" {
				args = append(ovmfArgs(t, vmDir), args...)
			}
			console := runVM(t, vmDir, nil, args...)
			assertBooted(t, console, "ipa-api-url=http://10.99.0.1:6385", "ipa-agent-token=tok-secret-123")
		})
	}
}
