#!/usr/bin/env bash
# Fetches the Debian kernel that ironflow's agent ramdisk and the VM tests
# boot, without installing it: `apt-get download` + `dpkg -x` into
# .data/kernel/. Idempotent: a second run with the kernel present does nothing.
#   .data/kernel/vmlinuz            the kernel
#   .data/kernel/modules/<version>/ its modules (no modules.dep: use modinfo)
#   .data/kernel/version            the kernel version string
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${KERNEL_DIR:-$root/.data/kernel}"
if [[ -s "$out/vmlinuz" && -s "$out/version" ]]; then
	exit 0
fi
for tool in apt-get apt-cache dpkg; do
	command -v "$tool" >/dev/null || { echo "fetch-kernel: '$tool' is missing; ironflow's ramdisk needs a Debian-based machine (or set KERNEL_DIR to a directory holding vmlinuz, version and modules/)" >&2; exit 1; }
done
pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')"
if [[ -z "$pkg" ]]; then
	apt-get update -qq >/dev/null 2>&1 || true
	pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')"
fi
[[ -n "$pkg" ]] || { echo "fetch-kernel: cannot find the package linux-image-amd64 depends on (run 'apt-get update')" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"; (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1)
dpkg -x "$tmp"/*.deb "$tmp/x"
version="${pkg#linux-image-}"
mkdir -p "$out/modules"
cp "$tmp/x/boot/vmlinuz-$version" "$out/vmlinuz.tmp"
rm -rf "$out/modules/$version"
cp -a "$tmp/x/lib/modules/$version" "$out/modules/$version" 2>/dev/null || cp -a "$tmp/x/usr/lib/modules/$version" "$out/modules/$version"
echo "$version" > "$out/version.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
mv "$out/version.tmp" "$out/version"
echo "fetch-kernel: $pkg in $out"
