package pxe

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The IPv6 lab: the bridge has fd99::1/64 and no IPv4 address at all.
const (
	labAddr6   = "fd99::1"
	labHTTP6   = "http://[" + labAddr6 + "]:8080"
	labAPIURL6 = "http://[" + labAddr6 + "]:6385"
)

// TestNetbootQEMU_UEFIIPv6 network-boots an OVMF VM on an IPv6-only
// segment with OVMF's IPv4 PXE turned off: ironflow's router
// advertisement (Managed flag) and DHCPv6 send OVMF's PXEv6 client to
// tftp://[fd99::1]/ipxe.efi; iPXE then asks DHCPv6 itself (user class
// "iPXE") and gets the node's script at http://[fd99::1]:8080, which
// loads the kernel and initrd over HTTP with bracketed literals. The
// kernel reports the node's parameters with the bracketed API URL.
func TestNetbootQEMU_UEFIIPv6(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b06", "52:54:00:99:00:06"
	// nodad: the services bind fd99::1 at once instead of after duplicate
	// address detection, which waits for the tap's carrier.
	l := newNetns(t, []string{"addr", "add", labAddr6 + "/64", "dev", "br0", "nodad"})
	images := labImages(t, dir)
	l.start(t, helperConfig{
		Config: Config{
			DHCPv6: &DHCPv6Config{
				Interface: "br0", Addr: netip.MustParseAddr(labAddr6), HTTPBaseURL: labHTTP6,
				Pools: []DHCPv6Pool{{
					Prefix: netip.MustParsePrefix("fd99::/64"),
					First:  netip.MustParseAddr("fd99::100"), Last: netip.MustParseAddr("fd99::1ff"),
				}},
			},
			RA:   &RAConfig{Interface: "br0", Prefix: netip.MustParsePrefix("fd99::/64"), Interval: 3 * time.Second},
			TFTP: &TFTPConfig{Addr: "[" + labAddr6 + "]:69"},
			HTTP: &HTTPConfig{Addr: "[" + labAddr6 + "]:8080", ImagesDir: images},
		},
		BootConfigs: []BootConfig{{
			NodeUUID: node, MACs: []string{mac}, BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent",
			KernelURL:    labHTTP6 + "/images/vmlinuz",
			InitrdURL:    labHTTP6 + "/images/initrd.gz",
			KernelParams: "console=ttyS0 ipa-api-url=" + labAPIURL6 + " ipa-node-uuid=" + node,
		}},
	})
	// romfile= drops the NIC's iPXE ROM so OVMF's own PXE client boots;
	// with IPv4 PXE off its boot order has PXEv6 only (OVMF's
	// RUNTIME_CONFIG, opt/org.tianocore/IPv4PXESupport).
	args := append(ovmfArgs(t, dir),
		"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns}, args...)
	assertBooted(t, console, "ipa-api-url="+labAPIURL6, "ipa-node-uuid="+node)
	logs := l.serviceLog()
	for _, want := range [][]string{
		{`"msg":"boot file offered"`, `"file":"tftp://[fd99::1]/ipxe.efi"`},
		{`"msg":"TFTP transfer done"`, `"file":"ipxe.efi"`},
		{`"msg":"boot file offered"`, `"file":"` + labHTTP6 + `/boot/` + node + `/boot.ipxe"`, `"ipxe":true`},
		{`/boot/` + node + `/boot.ipxe`, `"status":200`},
		{`/images/vmlinuz`, `"status":200`},
	} {
		if !logLine(logs, want...) {
			t.Errorf("no log line with %s", strings.Join(want, " "))
		}
	}
	if strings.Contains(logs, `"msg":"DHCP serving"`) {
		t.Errorf("a DHCPv4 service ran in the IPv6-only lab")
	}
}
