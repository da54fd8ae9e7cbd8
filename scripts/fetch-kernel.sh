#!/usr/bin/env bash
# Fetches the Debian kernel that ironflow's agent ramdisk and the VM tests
# boot, without installing it: `apt-get download` + `dpkg -x` into
# .data/kernel/. Idempotent: a second run with the kernel present does nothing.
#   .data/kernel/vmlinuz            the kernel
#   .data/kernel/modules/<version>/ its modules (no modules.dep: use modinfo)
#   .data/kernel/version            the kernel version string
# KERNEL_ARCH=arm64 fetches Debian's arm64 kernel (linux-image-arm64) into
# .data/kernel.arm64 instead, for the arm64 agent ramdisk (make
# ramdisk-arm64); it adds the arm64 architecture to dpkg to see that package.
# With it come arm64 machines' boot files, in .data/kernel.arm64/boot/:
# grubaa64.efi and shimaa64.efi (Debian's signed network GRUB and shim, the
# loaders the boot service offers arm64 UEFI machines), and
# systemd-bootaa64.efi and a static busybox for the VM tests' arm64 image.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
arch="${KERNEL_ARCH:-amd64}"
case "$arch" in
amd64) out="${KERNEL_DIR:-$root/.data/kernel}"; qual="" ;;
arm64) out="${KERNEL_DIR:-$root/.data/kernel.arm64}"; qual=":arm64" ;;
*) echo "fetch-kernel: KERNEL_ARCH must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
if [[ -s "$out/vmlinuz" && -s "$out/version" && ( -z "$qual" || -s "$out/boot/busybox" ) ]]; then
	exit 0
fi
for tool in apt-get apt-cache dpkg; do
	command -v "$tool" >/dev/null || { echo "fetch-kernel: '$tool' is missing; ironflow's ramdisk needs a Debian-based machine (or set KERNEL_DIR to a directory holding vmlinuz, version and modules/)" >&2; exit 1; }
done
if [[ -n "$qual" ]] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
	[[ $(id -u) -eq 0 ]] || { echo "fetch-kernel: run 'dpkg --add-architecture $arch && apt-get update' as root first" >&2; exit 1; }
	dpkg --add-architecture "$arch"
	apt-get update -qq >/dev/null 2>&1 || true
fi
depends() { apt-cache depends "linux-image-$arch$qual" 2>/dev/null | awk '/Depends: linux-image-[0-9]/{sub(/:.*/, "", $2); print $2; exit}'; }
pkg="$(depends)"
if [[ -z "$pkg" ]]; then
	apt-get update -qq >/dev/null 2>&1 || true
	pkg="$(depends)"
fi
[[ -n "$pkg" ]] || { echo "fetch-kernel: cannot find the package linux-image-$arch depends on (run 'apt-get update')" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"; (cd "$tmp" && apt-get download "$pkg$qual" >/dev/null 2>&1)
dpkg -x "$tmp"/*.deb "$tmp/x"
version="${pkg#linux-image-}"
mkdir -p "$out/modules"
cp "$tmp/x/boot/vmlinuz-$version" "$out/vmlinuz.tmp"
rm -rf "$out/modules/$version"
cp -a "$tmp/x/lib/modules/$version" "$out/modules/$version" 2>/dev/null || cp -a "$tmp/x/usr/lib/modules/$version" "$out/modules/$version"
if [[ -n "$qual" ]]; then
	(cd "$tmp" && apt-get download "grub-efi-$arch-signed$qual" "shim-signed$qual" "systemd-boot-efi$qual" "busybox-static$qual" >/dev/null 2>&1) ||
		{ echo "fetch-kernel: apt-get download of the $arch boot files failed (run 'apt-get update')" >&2; exit 1; }
	for deb in "$tmp"/grub-efi-*.deb "$tmp"/shim-signed_*.deb "$tmp"/systemd-boot-efi_*.deb "$tmp"/busybox-static_*.deb; do
		dpkg -x "$deb" "$tmp/b"
	done
	mkdir -p "$out/boot"
	cp "$tmp/b/usr/lib/grub/arm64-efi-signed/grubnetaa64.efi.signed" "$out/boot/grubaa64.efi"
	cp "$tmp/b/usr/lib/shim/shimaa64.efi.signed" "$out/boot/shimaa64.efi"
	cp "$tmp/b/usr/lib/systemd/boot/efi/systemd-bootaa64.efi" "$out/boot/systemd-bootaa64.efi"
	cp "$tmp/b/bin/busybox" "$out/boot/busybox.tmp"
fi
echo "$version" > "$out/version.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
mv "$out/version.tmp" "$out/version"
[[ -z "$qual" ]] || mv "$out/boot/busybox.tmp" "$out/boot/busybox"
echo "fetch-kernel: $pkg in $out"
