#!/usr/bin/env bash
# Installs the Debian packages ironflow's tests and `make run` need, when
# they are missing. As root it runs apt-get; otherwise it prints the one
# command to run. Idempotent and quiet when everything is present.
#   scripts/install-deps.sh run    what `make run` needs
#   scripts/install-deps.sh test   what `make test` needs (VMs, BMCs, the CLI,
#                                  Debian's Ironic as the differential tests' oracle)
#   scripts/install-deps.sh bench  what `make bench` needs: the test set (Ironic,
#                                  the baseline it measures against, is in it)
#   scripts/install-deps.sh --list run
#                                  print the set's probes and their packages
#                                  ("probe<TAB>package", sorted) and stop
# The run set is what `make run`'s default paths use: the agent ramdisk it
# builds, the agent ISO that virtual media boots (pxe/iso.go), and the
# baremetal CLI of the README's first session. The test set holds it all.
# tests/installer/install_deps_test.go checks the run set against the files
# pxe and agent/ramdisk name (pxe.ISOHostPackages, ramdisk.HostPackages).
# IRONFLOW_DEPS_ROOT (tests only) looks for the path probes under another
# root, so that a test can see them missing on a machine that has them.
set -euo pipefail
list=
if [[ "${1:-}" == --list ]]; then
	list=1
	shift
fi
what="${1:-test}"
case "$what" in
run | test | bench) ;;
*)
	echo "usage: scripts/install-deps.sh [--list] run|test|bench" >&2
	exit 2
	;;
esac
probe_root="${IRONFLOW_DEPS_ROOT:-}"

# command-or-path → Debian package
declare -A need=(
	[/usr/lib/postgresql]=postgresql
	# The README's first session.
	[/usr/bin/baremetal]=python3-ironicclient
	# The agent ISO that virtual media boots (pxe/iso.go): isolinux for
	# BIOS, systemd-boot (below) for UEFI.
	[/usr/lib/ISOLINUX/isolinux.bin]=isolinux
	[/usr/lib/syslinux/modules/bios/ldlinux.c32]=syslinux-common
	# The CA bundle the ramdisk's agent trusts for HTTPS (agent/ramdisk).
	[/etc/ssl/certs/ca-certificates.crt]=ca-certificates
	# The agent ramdisk carries the bootloaders it installs for partition
	# images: systemd-boot (UEFI) and GRUB's BIOS images, whose core
	# images the build makes with grub-mkimage.
	[/usr/lib/systemd/boot/efi/systemd-bootx64.efi]=systemd-boot-efi
	[/usr/lib/grub/i386-pc/boot.img]=grub-pc-bin
	[grub-mkimage]=grub-common
	# and mdadm for the software RAID steps (agent/raid.go).
	[/sbin/mdadm]=mdadm
	# The graphical console's browser client, which the API serves
	# (console/web, docs/console.md).
	[/usr/share/novnc/core/rfb.js]=novnc
	# The agent ISO's signed UEFI chain for secure boot (pxe/iso.go).
	[/usr/lib/shim/shimx64.efi.signed]=shim-signed
	[/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed]=grub-efi-amd64-signed
)
if [[ "$what" == test || "$what" == bench ]]; then
	need+=(
		[qemu-system-x86_64]=qemu-system-x86
		[qemu-img]=qemu-utils
		[/usr/lib/ipxe/qemu/efi-virtio.rom]=ipxe-qemu
		[/usr/share/OVMF/OVMF_CODE_4M.fd]=ovmf
		# The arm64 VM test (tests/e2e/deploy_arm64_test.go): QEMU's aarch64
		# system emulator and its UEFI firmware (AAVMF).
		[qemu-system-aarch64]=qemu-system-arm
		[/usr/share/AAVMF/AAVMF_CODE.fd]=qemu-efi-aarch64
		[/usr/lib/ipxe/undionly.kpxe]=ipxe
		[ipmi_sim]=openipmi
		[ipmitool]=ipmitool
		[syslinux]=syslinux
		[mcopy]=mtools
		[mkfs.vfat]=dosfstools
		[sfdisk]=fdisk
		[cpio]=cpio
		[xorriso]=xorriso
		[zstd]=zstd
		[/usr/bin/openstack]=python3-openstackclient
		# Prometheus scrapes a stack and promtool checks the metrics and the
		# alert rules (tests/metrics_prometheus_test.go, docs/metrics.md).
		[promtool]=prometheus
		[prometheus]=prometheus
		# Nova's own ironic driver as the client (tests/nova_driver_test.go);
		# it builds config drives with genisoimage.
		[/usr/lib/python3/dist-packages/nova/virt/ironic/driver.py]=python3-nova
		[genisoimage]=genisoimage
		[ip]=iproute2
		[modinfo]=kmod
		[/bin/busybox]=busybox-static
		[curl]=curl
		[glance-api]=glance-api
		# Keystone for the keystone auth strategy's tests (internal/testkit/devstack/keystone.go).
		[keystone-wsgi-public]=python3-keystone
		# Debian's Ironic all-in-one (ironic.cmd.singleprocess, internal/testkit/ironic):
		# the oracle of tests/ironic_oracle_test.go and bench's ironic part.
		[/usr/lib/python3/dist-packages/ironic/cmd/singleprocess.py]=python3-ironic
		# The console pages' browser tests (console/web).
		[chromium]=chromium
		# The OCI registry of the oci:// image source tests
		# (internal/testkit/registry, docs/oci-images.md).
		[/usr/bin/docker-registry]=docker-registry
		# LLDP from a switch port for the Metal3 VM test's inspection
		# (tests/metal3: lldpd on the lab's bridge, inside its namespace).
		[lldpd]=lldpd
	)
fi

if [[ -n "$list" ]]; then
	for probe in "${!need[@]}"; do
		printf '%s\t%s\n' "$probe" "${need[$probe]}"
	done | LC_ALL=C sort
	exit 0
fi

missing=()
for probe in "${!need[@]}"; do
	if [[ "$probe" == /* ]]; then
		[[ -e "$probe_root$probe" ]] && continue
	else
		command -v "$probe" >/dev/null 2>&1 && continue
	fi
	missing+=("${need[$probe]}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if ! command -v apt-get >/dev/null 2>&1; then
	echo "ironflow needs these Debian packages (or their equivalents): ${missing[*]}" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "ironflow needs these Debian packages: ${missing[*]}" >&2
	echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages such as lldpd, prometheus and docker-registry ship services:
# none may start on this host (the tests start their own, on loopback or
# inside their namespaces), so invoke-rc.d is told no while apt runs.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
if ! apt-get update -qq >/dev/null || ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "ironflow could not install these Debian packages: ${missing[*]}" >&2
	echo "apt-get said why above; install them, then run this again" >&2
	exit 1
fi
echo "installed: ${missing[*]}"
