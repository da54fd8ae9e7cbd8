package pxe

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestDHCPBootFileByClientArchitecture: the loader a PXE ROM is offered
// follows its architecture (option 93, RFC 4578 §2.1): BIOS and x86-64
// UEFI get iPXE, arm64 UEFI (11, what AAVMF's PXE sends) Debian's network
// GRUB, or shim when its node boots with secure boot; an architecture
// without a loader (arm64 UEFI HTTP, 19) gets an address and no boot file.
func TestDHCPBootFileByClientArchitecture(t *testing.T) {
	const sbNode, sbMAC = "8f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", "52:54:00:aa:bb:03"
	b := testBackend(t)
	if err := b.Put(BootConfig{NodeUUID: sbNode, MACs: []string{sbMAC}, BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent", SecureBoot: true,
		KernelURL: testHTTPURL + "/images/vmlinuz", InitrdURL: testHTTPURL + "/images/initrd"}); err != nil {
		t.Fatal(err)
	}
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), b, NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	arm64 := clientShape{class: "PXEClient:Arch:00011:UNDI:003000", arch: []byte{0, 11}}
	arm64HTTP := clientShape{class: "HTTPClient:Arch:00019:UNDI:003000", arch: []byte{0, 19}}
	cases := []struct {
		name     string
		mac      string
		shape    clientShape
		wantFile string
	}{
		{"BIOS", testMAC, clientShape{class: "PXEClient:Arch:00000:UNDI:002001", arch: []byte{0, 0}}, DefaultBIOSBootFile},
		{"x86-64 UEFI", testMAC, ovmfPXE, DefaultUEFIBootFile},
		{"x86-64 UEFI, secure boot", sbMAC, ovmfPXE, DefaultSecureBootFile},
		{"arm64 UEFI", testMAC, arm64, DefaultARM64BootFile},
		{"arm64 UEFI, secure boot", sbMAC, arm64, DefaultARM64SecureBootFile},
		{"arm64 UEFI HTTP: no loader", testMAC, arm64HTTP, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply, _ := handleExpect(t, h, packet(t, dhcpv4.MessageTypeDiscover, tc.mac, tc.shape), dhcpv4.MessageTypeOffer)
			if reply == nil {
				return
			}
			if reply.BootFileName != tc.wantFile || reply.BootFileNameOption() != tc.wantFile {
				t.Errorf("file %q, option 67 %q; want %q", reply.BootFileName, reply.BootFileNameOption(), tc.wantFile)
			}
			wantNext := net.ParseIP(testServer)
			if tc.wantFile == "" {
				wantNext = nil
			}
			if got := reply.ServerIPAddr; !(isSet(got) && got.Equal(wantNext)) && !(wantNext == nil && !isSet(got)) {
				t.Errorf("siaddr (TFTP server) %v, want %v", got, wantNext)
			}
			if reply.YourIPAddr == nil || reply.YourIPAddr.IsUnspecified() {
				t.Errorf("no address offered")
			}
		})
	}
}
