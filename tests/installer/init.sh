#!/bin/busybox sh
# ironflow test installer: follows anaconda's side of an anaconda deploy
# (fetch inst.ks, run %pre, write liveimg to the disk, run %post, %onerror on
# failure) with busybox only. Markers on the console let tests follow it.
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /sbin /usr/bin /usr/sbin
/bin/busybox mount -t devtmpfs devtmpfs /dev
# The initramfs has no /dev/console node; the kernel started us without
# stdio, so take the console now.
exec 0</dev/console 1>/dev/console 2>&1
/bin/busybox --install -s
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys

M="@MARKER@"
DISK="@DISK@"
say() { echo "$M $*"; }
finish() {
	sync
	if grep -qE '^[[:space:]]*(poweroff|halt|shutdown)([[:space:]]|$)' /tmp/ks/commands 2>/dev/null; then
		poweroff -f
	fi
	reboot -f
}
fail() {
	say "error $*"
	for f in $(ls /tmp/ks/onerror.*.sh 2>/dev/null | sort -t. -k2 -n); do
		sh "$f" || say "error %onerror $f failed"
	done
	finish
}

say "start"
for m in $(cat /lib/modules/load-order); do
	insmod "/lib/modules/$m.ko" || fail "insmod $m"
done
i=0
while [ ! -e /sys/class/net/eth0 ]; do
	i=$((i + 1)); [ $i -gt 30 ] && fail "no eth0"
	sleep 1
done
ifconfig lo 127.0.0.1 up
udhcpc -i eth0 -s /etc/udhcpc.script -n -q -t 10 -T 2 >/tmp/udhcpc.log 2>&1 || { cat /tmp/udhcpc.log; fail "dhcp on eth0"; }
say "network up $(ifconfig eth0 | sed -n 's/.*inet addr:\([0-9.]*\).*/\1/p')"

ks=$(sed -n 's/.*inst\.ks=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$ks" ] || fail "no inst.ks= on the kernel command line"
wget -q -O /tmp/ks.cfg "$ks" || fail "fetch kickstart $ks"
mkdir -p /tmp/ks
awk -v dir=/tmp/ks '
	/^[ \t]*%end[ \t]*$/ { if (insec) { close(f); insec = 0 }; next }
	insec { print > f; next }
	/^[ \t]*%(pre|pre-install|post|onerror|traceback|packages|addon|anaconda)([ \t]|$)/ {
		name = substr($1, 2); n[name]++; f = dir "/" name "." n[name] ".sh"; insec = 1; printf "" > f; next
	}
	{ print > (dir "/commands") }
' /tmp/ks.cfg || fail "parse kickstart"
say "kickstart fetched"

for f in $(ls /tmp/ks/pre.*.sh 2>/dev/null | sort -t. -k2 -n); do
	sh "$f" || fail "%pre $f"
done
say "pre done"

img=$(sed -n 's/^[[:space:]]*liveimg[[:space:]].*--url[= ]\([^ ]*\).*/\1/p' /tmp/ks/commands | head -n 1)
[ -n "$img" ] || fail "no liveimg --url in the kickstart"
set -o pipefail
wget -q -O - "$img" | dd of="$DISK" bs=1M conv=fsync 2>/tmp/dd.log || { cat /tmp/dd.log; fail "write $img to $DISK"; }
set +o pipefail
sync
say "image written to $DISK"

for f in $(ls /tmp/ks/post.*.sh 2>/dev/null | sort -t. -k2 -n); do
	sh "$f" || fail "%post $f"
done
say "done"
finish
