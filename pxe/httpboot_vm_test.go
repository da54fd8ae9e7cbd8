package pxe

import (
	"strings"
	"testing"
)

// ovmfHTTPBootOnly are OVMF's fw_cfg switches that drop its PXE boot
// options (IPv4 and IPv6), leaving UEFI HTTP boot.
var ovmfHTTPBootOnly = []string{
	"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
	"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n",
}

// TestNetbootQEMU_UEFIHTTPBootIPXE boots a node whose boot interface is
// http-ipxe on OVMF with no TFTP server in the lab: the firmware's PXE
// attempt gets an address and no boot file, its UEFI HTTP boot gets
// snponly.efi's URL, iPXE gets the node's script, the kernel and initrd
// come over HTTP.
func TestNetbootQEMU_UEFIHTTPBootIPXE(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b16", "52:54:00:99:16:01"
	bc := labBootConfig(node, mac, BootModeUEFI)
	bc.Method = MethodHTTPIPXE
	bc.LoaderURL = labHTTP + LoaderPath(DefaultHTTPIPXELoader)
	l := newLabWith(t, dir, func(c *Config) { c.TFTP = nil }, bc)
	// romfile= drops the NIC's iPXE option ROM, which would otherwise
	// boot first and hide the firmware's own HTTP boot. OVMF's PXE boot
	// options are turned off as a machine set to boot UEFI HTTP only is:
	// each would wait out its DHCP timeouts (about 2.5 min under TCG)
	// before the HTTP boot option runs.
	args := append(ovmfArgs(t, dir), ovmfHTTPBootOnly...)
	args = append(args,
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns}, args...)
	assertBooted(t, console, "ipa-api-url="+labAPIURL, "ipa-node-uuid="+node)
	logs := l.serviceLog()
	if !logLine(logs, `"msg":"boot file offered"`, `"http_boot":true`, `"file":"`+bc.LoaderURL+`"`) {
		t.Errorf("DHCP never offered the loader's URL to a UEFI HTTP boot client")
	}
	if !logLine(logs, `"path":"/loaders/snponly.efi"`, `"status":200`) {
		t.Errorf("the firmware never fetched snponly.efi over HTTP")
	}
	if !strings.Contains(logs, "/boot/"+node+"/boot.ipxe") {
		t.Errorf("the node's iPXE script was never fetched")
	}
	if strings.Contains(logs, "TFTP") {
		t.Errorf("the lab ran a TFTP service")
	}
}
