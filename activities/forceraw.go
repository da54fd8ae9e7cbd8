package activities

import (
	"strings"

	"github.com/ironflow/ironflow/imagecache"
)

// rawFromCache rewrites, for an image the boot service's cache converts to
// raw (--force-raw-images, Ironic's force_raw_images), what the agent is
// told: disk_format raw for a qcow2 image, and the checksum as the cache's
// checksums file, since the raw image's checksum is known only once the
// cache has converted it (the cache verified the origin's own checksum
// first). An image not declared qcow2 is converted only if its first
// bytes say qcow2; either way the cache's checksum is of what it serves,
// and the agent detects the format. An image declared in another format is
// served as it is.
func (a *Activities) rawFromCache(ii map[string]any, o imagecache.Origin, nodeUUID string) {
	if !a.Config.ForceRawImages || o.DownloadSource != imagecache.DownloadHTTP {
		return
	}
	switch strings.ToLower(o.DiskFormat) {
	case "qcow2":
		ii["image_disk_format"] = "raw"
	case "":
	default:
		return
	}
	ii["image_checksum"] = strings.TrimRight(a.Config.BootURL, "/") + imagecache.ChecksumPath(nodeUUID)
	delete(ii, "image_os_hash_algo")
	delete(ii, "image_os_hash_value")
}
