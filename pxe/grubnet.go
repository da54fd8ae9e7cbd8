package pxe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Secure boot over PXE, without iPXE (iPXE is not signed): the chain
// Ironic's grub PXE boot uses (pxe boot, uefi, secure boot), all of it
// over TFTP:
//
//	UEFI PXE ROM (93 = 7/9), node's secure_boot true → TFTP shimx64.efi (Microsoft-signed shim)
//	shim                                              → TFTP grubx64.efi (Debian's signed grubnetx64)
//	GRUB (prefix /grub)                               → TFTP grub/grub.cfg: configfile grub/ironflow/${net_default_mac}.cfg
//	the node's grub config                            → TFTP ironflow/<mac>/kernel and initrd (Debian's signed kernel, the ramdisk)
//
// The node's config, kernel and initrd are found by the MAC in the file
// name, as the DHCP handler finds the node; a MAC without a boot config,
// or whose config is not a PXE one, gets "file not found". Kernel and
// initrd are streamed from the boot config's URLs (the HTTP boot service):
// Debian's GRUB 2.06 reaches HTTP only on port 80.

// Default names and files of the secure-boot chain over PXE.
const (
	// DefaultSecureBootFile is the DHCP boot file of a UEFI machine whose
	// node boots with secure boot on.
	DefaultSecureBootFile = "shimx64.efi"
	// grubNetName is the name shim loads from its own TFTP directory.
	grubNetName = "grubx64.efi"
	// DefaultSignedNetGrub is Debian's signed network GRUB (package
	// grub-efi-amd64-signed); its prefix is /grub.
	DefaultSignedNetGrub = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
	grubMasterConfig     = "grub/grub.cfg"
	grubNodeConfigDir    = "grub/ironflow/"
	grubFilesDir         = "ironflow/"
)

// grubMaster is grub/grub.cfg: every machine reads its own by its MAC
// (Ironic's master grub.cfg does the same with $net_default_mac).
const grubMaster = "set timeout=0\nconfigfile /" + grubNodeConfigDir + "${net_default_mac}.cfg\n"

// RenderGRUBConfig is the node's GRUB configuration for its next network
// boot under secure boot: the kernel and initrd from TFTP (the names the
// TFTP service maps to the boot config's URLs) and the kernel parameters,
// with BOOTIF as the iPXE script sets it.
func RenderGRUBConfig(bc BootConfig, mac net.HardwareAddr) (string, error) {
	if err := checkScriptWords(bc.KernelParams); err != nil {
		return "", fmt.Errorf("kernel params: %w", err)
	}
	if strings.ContainsAny(bc.KernelParams, "\"'$;{}\\`") {
		return "", errors.New("kernel params: characters GRUB would interpret")
	}
	params := strings.Join(strings.Fields(bc.KernelParams), " ")
	if !strings.Contains(params, "BOOTIF=") {
		params += " BOOTIF=01-" + strings.ReplaceAll(mac.String(), ":", "-")
	}
	dir := "/" + grubFilesDir + mac.String()
	var b strings.Builder
	fmt.Fprintf(&b, "# ironflow: node %s, %s boot, secure boot chain\n", bc.NodeUUID, bc.Kind)
	b.WriteString("set timeout=0\nset default=0\n")
	b.WriteString("menuentry \"ironflow\" {\n")
	fmt.Fprintf(&b, "\tlinux %s/kernel %s\n", dir, strings.TrimSpace(params))
	fmt.Fprintf(&b, "\tinitrd %s/initrd\n", dir)
	b.WriteString("}\n")
	return b.String(), nil
}

// grubNet serves the chain's dynamic files from the boot configs.
type grubNet struct {
	backend Backend
	client  *http.Client
}

// open returns the file name of the secure-boot chain names, its size
// (-1 when unknown) and whether name is one of them at all.
func (g *grubNet) open(ctx context.Context, name string) (io.ReadCloser, int64, bool, error) {
	switch {
	case name == grubMasterConfig:
		return io.NopCloser(strings.NewReader(grubMaster)), int64(len(grubMaster)), true, nil
	case strings.HasPrefix(name, grubNodeConfigDir) && strings.HasSuffix(name, ".cfg"):
		mac, err := net.ParseMAC(strings.TrimSuffix(strings.TrimPrefix(name, grubNodeConfigDir), ".cfg"))
		if err != nil {
			return nil, 0, true, errTFTPPath
		}
		bc, err := g.bootConfig(ctx, mac)
		if err != nil {
			return nil, 0, true, err
		}
		cfg, err := RenderGRUBConfig(*bc, mac)
		if err != nil {
			return nil, 0, true, err
		}
		return io.NopCloser(strings.NewReader(cfg)), int64(len(cfg)), true, nil
	case strings.HasPrefix(name, grubFilesDir):
		macText, file, ok := strings.Cut(strings.TrimPrefix(name, grubFilesDir), "/")
		if !ok || (file != "kernel" && file != "initrd") {
			return nil, 0, false, nil
		}
		mac, err := net.ParseMAC(macText)
		if err != nil {
			return nil, 0, true, errTFTPPath
		}
		bc, err := g.bootConfig(ctx, mac)
		if err != nil {
			return nil, 0, true, err
		}
		u := bc.KernelURL
		if file == "initrd" {
			u = bc.InitrdURL
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, 0, true, fmt.Errorf("%s of node %s: %w", file, bc.NodeUUID, err)
		}
		resp, err := g.client.Do(req)
		if err != nil {
			return nil, 0, true, fmt.Errorf("%s of node %s: %w", file, bc.NodeUUID, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, 0, true, fmt.Errorf("%s of node %s: GET %s: %s", file, bc.NodeUUID, u, resp.Status)
		}
		return resp.Body, resp.ContentLength, true, nil
	}
	return nil, 0, false, nil
}

func (g *grubNet) bootConfig(ctx context.Context, mac net.HardwareAddr) (*BootConfig, error) {
	if g.backend == nil {
		return nil, errors.New("file not found")
	}
	bc, err := g.backend.BootConfigByMAC(ctx, mac)
	if err != nil || bc.Method != MethodPXE || bc.KernelURL == "" || bc.InitrdURL == "" {
		return nil, errors.New("file not found")
	}
	return bc, nil
}

// ServeBootConfigs makes the TFTP service serve the secure-boot chain
// (shim, signed GRUB, and each node's GRUB config, kernel and initrd) for
// the boot configs of backend.
func (s *TFTPServer) ServeBootConfigs(backend Backend) {
	s.grub = &grubNet{backend: backend, client: &http.Client{Timeout: 10 * time.Minute}}
}
