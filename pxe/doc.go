// Package pxe owns ironflow's network boot services and boot media: DHCP
// (reservation or ProxyDHCP mode), DHCPv6 and router advertisements,
// read-only TFTP for the iPXE loaders, the
// HTTP boot service (per-node iPXE scripts, agent images, per-node virtual
// media ISOs, per-node kickstarts for anaconda deploys) and the agent ISO
// builder. RenderKickstart renders a kickstart like Ironic's: it carries the
// node's agent token, so kickstarts are never logged or cached.
//
// It reads what to boot through small interfaces (Backend, NodeBackend,
// Leases) and never imports the store. It must never answer a machine
// ironflow was not asked to boot: a MAC or node without a boot config gets
// no DHCP reply and a 404.
//
// Boot chain, as measured on QEMU (SeaBIOS, OVMF) with Debian's ipxe:
//
//	PXE ROM (option 93 = 0 BIOS, 7/9 UEFI, no user class) → TFTP undionly.kpxe | ipxe.efi
//	iPXE (user class 77 = "iPXE")                        → http://<http>/boot/<uuid>/boot.ipxe
//	boot.ipxe                                            → kernel + initrd over HTTP, retried on failure
//
// A UEFI machine whose node boots with secure boot on gets the signed
// chain instead, over TFTP: shimx64.efi → grubx64.efi (signed GRUB) →
// grub/grub.cfg → the node's config by MAC → kernel and initrd
// (grubnet.go).
//
// An arm64 UEFI machine (option 93 = 11, AAVMF on QEMU's virt machine) has
// no iPXE in Debian: it gets the same GRUB chain, grubaa64.efi (Debian's
// signed network GRUB) directly, or shimaa64.efi → grubaa64.efi under
// secure boot (dhcp.go, chooseBootFile).
//
// iPXE waits 11 s for a ProxyDHCP offer unless the offer carries
// encapsulated option 175 sub-option 176 = 1; ironflow sends it to every
// iPXE client.
//
// IPv6: iPXE also waits about 16 s for an IPv6 router advertisement before
// it runs the script when no router answers on the segment. On an IPv6
// segment ironflow can advertise itself (RAConfig, ra.go: Managed flag, no
// default route); on an IPv4-only provisioning network it sends none, and
// each iPXE boot costs those 16 s unless a router advertisement daemon runs
// there or the iPXE build has no IPv6 (NET_PROTO_IPV6 undefined).
//
// DHCPv6 (dhcpv6.go) is stateful only: RFC 8415 has no ProxyDHCP, so the
// DHCPv6 service is the segment's server for the MACs it boots, and silent
// for all others (docs/bmcs-and-boot.md, "IPv6 provisioning networks").
//
// Reservation-mode replies to clients without an address are broadcast
// (RFC 2131 §4.1 allows unicast to yiaddr only with an injected ARP entry).
package pxe
