#!/bin/sh
# /init of ironflow's end-to-end test image. It proves on the serial console
# that the machine booted from its disk and what its config drive says, in
# lines starting with IRONFLOW-E2E that the tests look for, then idles like
# a deployed server.
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

fw=bios
[ -d /sys/firmware/efi ] && fw=uefi
echo "IRONFLOW-E2E booted-from-disk firmware=$fw"

for m in $(cat /lib/modules/order); do
	insmod "/lib/modules/$m.ko" || echo "IRONFLOW-E2E insmod-failed $m"
done

# An ISO 9660 volume: "CD001" at byte 32769, the volume label at 32808.
iso_label() {
	[ "$(dd if="$1" bs=1 skip=32769 count=5 2>/dev/null)" = CD001 ] || return 1
	dd if="$1" bs=1 skip=32808 count=32 2>/dev/null | tr -d ' '
}

find_config_drive() {
	findfs LABEL=config-2 2>/dev/null && return 0
	for d in /dev/vd* /dev/sd* /dev/sr*; do
		[ -b "$d" ] || continue
		[ "$(iso_label "$d")" = config-2 ] && { echo "$d"; return 0; }
	done
	return 1
}

# Disks appear a moment after virtio_blk loads; their partitions after that.
i=0
while [ $i -lt 100 ] && ! ls /dev/vd? >/dev/null 2>&1; do
	i=$((i + 1))
	sleep 0.3
done
dev=""
i=0
while [ $i -lt 10 ]; do
	dev=$(find_config_drive) && break
	dev=""
	i=$((i + 1))
	sleep 0.3
done

if [ -n "$dev" ] && mount -t iso9660 -o ro "$dev" /mnt; then
	json=$(tr -d '\n' </mnt/openstack/latest/meta_data.json)
	host=$(echo "$json" | sed -n 's/.*"hostname" *: *"\([^"]*\)".*/\1/p')
	key=$(echo "$json" | sed -n 's/.*"public_keys" *: *{ *"[^"]*" *: *"\([^"]*\)".*/\1/p')
	echo "IRONFLOW-E2E config-drive=$dev"
	echo "IRONFLOW-E2E hostname=$host key=$key"
	# The first network's address in network_data, IPv6 ones included.
	if [ -f /mnt/openstack/latest/network_data.json ]; then
		nd=$(tr -d '\n' </mnt/openstack/latest/network_data.json)
		ntype=$(echo "$nd" | grep -o '"type" *: *"ipv[46][^"]*"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
		naddr=$(echo "$nd" | grep -o '"ip_address" *: *"[^"]*"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
		echo "IRONFLOW-E2E network-data type=$ntype ip_address=$naddr"
	fi
else
	echo "IRONFLOW-E2E no-config-drive"
fi
echo "IRONFLOW-E2E done"
while :; do sleep 3600; done
