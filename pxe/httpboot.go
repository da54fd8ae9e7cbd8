package pxe

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// UEFI HTTP boot (UEFI specification, "HTTP Boot", §24.7): the
// firmware's own HTTP client fetches the loader, no TFTP and no PXE ROM in
// the chain. Its DHCP request says vendor class (60) "HTTPClient" and a
// client architecture (93) of the "boot from HTTP" kind (RFC 4578 §2.1,
// IANA "Processor Architecture Types": 16 for x86-64). The answer that
// makes it boot carries vendor class "HTTPClient" back and the loader's
// URL as boot file (option 67, and the file field).
//
// Nodes whose boot interface is http-ipxe (Ironic's HttpIPXEBoot) are
// given iPXE built for the firmware's network stack (snponly.efi): iPXE
// then asks DHCP again with user class "iPXE" and gets the node's script,
// which loads the agent kernel and initramfs over HTTP as for ipxe.
//
// A node that boots over HTTP gets an address but no boot file when its
// firmware asks as a PXE client first (the firmware's PXE boot option):
// that attempt fails at once and the firmware goes on to its HTTP boot
// option, so no TFTP server is needed.

// Boot methods of the HTTP boot interfaces, as the store spells them.
const (
	// MethodHTTPIPXE: UEFI HTTP boot of iPXE, then the node's iPXE script
	// (Ironic's http-ipxe boot interface).
	MethodHTTPIPXE = "http-ipxe"
)

// httpClientClass is the vendor class (60) of a UEFI HTTP boot client and
// of the server's answer (UEFI specification §24.7).
const httpClientClass = "HTTPClient"

// DefaultHTTPIPXELoader is the iPXE build a UEFI HTTP boot loads for the
// http-ipxe boot interface: iPXE driving the firmware's own network
// interface (SNP), as Ironic's default uefi_ipxe_bootfile_name.
const DefaultHTTPIPXELoader = "snponly.efi"

// DefaultLoadersDir is where the boot service finds the UEFI loaders it
// serves under /loaders/ (Debian's ipxe package).
const DefaultLoadersDir = "/usr/lib/ipxe"

// LoaderPath is the HTTP boot service's path of a loader file; a worker
// joins it to the service's URL to make a node's loader URL.
func LoaderPath(file string) string { return "/loaders/" + file }

// isHTTPClient reports whether the vendor class says UEFI HTTP boot.
func isHTTPClient(req *dhcpv4.DHCPv4) bool {
	return bytes.HasPrefix(req.GetOneOption(dhcpv4.OptionClassIdentifier), []byte(httpClientClass))
}

// httpBootArchs are the client architectures (93) of UEFI HTTP boot
// clients, with the cpu_arch a node of that kind reports.
var httpBootArchs = map[iana.Arch]string{
	iana.EFI_X86_64_HTTP: "x86_64",
	iana.EFI_ARM64_HTTP:  "aarch64",
}

// HTTPBootArch returns the cpu_arch of a UEFI HTTP boot client
// architecture ("" for one ironflow has no name for).
func HTTPBootArch(a iana.Arch) string { return httpBootArchs[a] }

// isHTTPBootMethod reports whether a node boots over UEFI HTTP boot.
func isHTTPBootMethod(method string) bool { return method == MethodHTTPIPXE }

// applyHTTPBoot writes the boot part of a reply for a node that boots over
// UEFI HTTP, or for a UEFI HTTP client; iPXE clients are answered by
// apply before. It returns false when the reply gets no boot file.
func (b *bootOptions) applyHTTPBoot(req, reply *dhcpv4.DHCPv4, bc *BootConfig, log *slog.Logger) bool {
	mac, arch := req.ClientHWAddr.String(), clientArch(req)
	switch {
	case !isHTTPBootMethod(bc.Method):
		log.Debug("UEFI HTTP boot client of a node that boots over PXE: no boot file", "mac", mac, "node", bc.NodeUUID)
		return false
	case !isHTTPClient(req):
		log.Info("PXE client of a node that boots over UEFI HTTP: no boot file, the firmware tries HTTP next", "mac", mac, "node", bc.NodeUUID)
		return false
	case bc.LoaderURL == "":
		log.Warn("node boots over UEFI HTTP but has no loader URL", "mac", mac, "node", bc.NodeUUID)
		return false
	}
	if _, ok := httpBootArchs[arch]; !ok {
		log.Warn("no UEFI HTTP boot loader for client architecture", "mac", mac, "node", bc.NodeUUID, "arch", arch.String())
		return false
	}
	reply.BootFileName = bc.LoaderURL
	reply.UpdateOption(dhcpv4.OptBootFileName(bc.LoaderURL))
	reply.ServerIPAddr = b.cfg.Addr.AsSlice()
	// UEFI specification §24.7: the offer that carries the boot URI says
	// "HTTPClient" in option 60, or the firmware ignores it.
	reply.UpdateOption(dhcpv4.OptClassIdentifier(httpClientClass))
	log.Info("boot file offered", "mac", mac, "node", bc.NodeUUID, "file", bc.LoaderURL, "arch", arch.String(), "http_boot", true)
	return true
}

// loader serves GET /loaders/{file}: a UEFI loader (a *.efi file of the
// loaders directory, symlinks inside it followed) a firmware fetches over
// UEFI HTTP boot. Other files of the directory are not served.
func (h *httpBoot) loader(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if h.loaders == nil || path.Base(name) != name || !strings.HasSuffix(name, ".efi") {
		http.NotFound(w, r)
		return
	}
	f, err := h.loaders.Open(name)
	if err != nil {
		// Missing, or a symlink out of the directory (os.Root refuses
		// it): nothing to serve.
		h.log.Debug("open loader", "file", name, "error", err)
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	// EDK2's HTTP boot takes "application/efi" as an EFI image whatever
	// the URL ends with (UEFI specification §24.7).
	w.Header().Set("Content-Type", "application/efi")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// openLoaders opens the loaders directory. A missing default directory is
// no error: the service then answers 404 to /loaders/ and serves the rest.
func (h *httpBoot) openLoaders(cfg HTTPConfig) error {
	dir := cfg.LoadersDir
	if dir == "" {
		dir = DefaultLoadersDir
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("http boot: open loaders dir: %w", err)
	}
	h.loaders = root
	return nil
}
