#!/usr/bin/env bash
# Installs the Debian packages ironflow's tests and `make run` need, when
# they are missing. As root it runs apt-get; otherwise it prints the one
# command to run. Idempotent and quiet when everything is present.
#   scripts/install-deps.sh run    what `make run` needs
#   scripts/install-deps.sh test   what `make test` needs (VMs, BMCs, the CLI)
#   scripts/install-deps.sh bench  what `make test` needs and Ironic, the
#                                  baseline `make bench` measures against
set -euo pipefail
what="${1:-test}"

# command-or-path → Debian package
declare -A need=(
	[/usr/lib/postgresql]=postgresql
	# The agent ramdisk carries the bootloaders it installs for partition
	# images: systemd-boot (UEFI) and GRUB's BIOS images (grub-mkimage).
	[/usr/lib/systemd/boot/efi/systemd-bootx64.efi]=systemd-boot-efi
	[/usr/lib/grub/i386-pc/boot.img]=grub-pc-bin
	# and mdadm for the software RAID steps (agent/raid.go).
	[/sbin/mdadm]=mdadm
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
		[/usr/lib/ipxe/undionly.kpxe]=ipxe
		[ipmi_sim]=openipmi
		[ipmitool]=ipmitool
		[/usr/lib/ISOLINUX/isolinux.bin]=isolinux
		[/usr/lib/syslinux/modules/bios/ldlinux.c32]=syslinux-common
		[syslinux]=syslinux
		[mcopy]=mtools
		[mkfs.vfat]=dosfstools
		[sfdisk]=fdisk
		[cpio]=cpio
		[xorriso]=xorriso
		[zstd]=zstd
		[/usr/bin/baremetal]=python3-ironicclient
		[/usr/bin/openstack]=python3-openstackclient
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
	)
fi

if [[ "$what" == bench ]]; then
	# Debian's Ironic all-in-one (ironic.cmd.singleprocess), bench's ironic part.
	need+=([/usr/lib/python3/dist-packages/ironic/cmd/singleprocess.py]=python3-ironic)
fi

missing=()
for probe in "${!need[@]}"; do
	if [[ "$probe" == /* ]]; then
		[[ -e "$probe" ]] && continue
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
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"
