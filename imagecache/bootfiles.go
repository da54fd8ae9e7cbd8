package imagecache

import (
	"context"
	"fmt"
	"strings"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/oci"
)

// The boot files of a partition image, which the agent's install_bootloader
// puts next to the root filesystem: instance_info/kernel and ramdisk.
const (
	PartKernel  = "kernel"
	PartRamdisk = "ramdisk"
)

// BootParts are the boot files, in the order they are resolved.
var BootParts = []string{PartKernel, PartRamdisk}

// BootFileID is the Glance image a node's kernel or ramdisk (part) is, if
// it is one: instance_info/<part> when it names a Glance image (a URL there
// is the agent's to fetch: ""), else, for a partition image from Glance, its
// kernel_id or ramdisk_id property, as Ironic's build_instance_info_for_deploy
// maps them. o is the node's Locate'd image.
func BootFileID(ii map[string]any, o Origin, part string) string {
	if v, _ := ii[part].(string); strings.TrimSpace(v) != "" {
		id, _ := glance.ImageID(v)
		return id
	}
	if o.GlanceID == "" || !PartitionImage(ii, o) {
		return ""
	}
	if part == PartKernel {
		return o.KernelID
	}
	return o.RamdiskID
}

// PartitionImage says whether a node deploys a partition image:
// instance_info/image_type when set, else Glance's verdict on a Glance image
// (Ironic's images.is_whole_disk_image).
func PartitionImage(ii map[string]any, o Origin) bool {
	if t, _ := ii["image_type"].(string); t != "" {
		return t == "partition"
	}
	return o.GlanceID != "" && o.Partition
}

// BootFileCached says whether a boot file that is a Glance image is served
// by the cache: unless instance_info/image_download_source is direct, as
// for the Glance image itself.
func BootFileCached(ii map[string]any) bool {
	ds, _ := ii["image_download_source"].(string)
	return strings.ToLower(strings.TrimSpace(ds)) != DownloadDirect
}

// CachedBootPath is where, below the boot HTTP service, a node's agent
// fetches a boot file (part) that is a Glance image.
func CachedBootPath(nodeUUID, part string) string { return "/cache/" + nodeUUID + "/" + part }

// BootFileSource resolves the Glance image id of a boot file (it must be
// active and have a checksum, whatever its formats) into the cache entry
// that serves it.
func BootFileSource(ctx context.Context, g *glance.Client, id string) (Source, error) {
	if g == nil {
		return Source{}, fmt.Errorf("%s %s is a Glance image: %w", "boot file", id, ErrNoGlance)
	}
	img, err := g.ResolveFile(ctx, id)
	if err != nil {
		return Source{}, err
	}
	o := Origin{GlanceID: img.ID, Size: img.Size}
	o.Algo, o.Hash = img.ChecksumOf()
	return o.Source(g, nil), nil
}

// BootFileOCI resolves a boot file given as an oci:// reference
// (instance_info/kernel or ramdisk of a partition image) to the cache entry
// of its manifest's one layer, keyed by digest. As Ironic requires of
// artifacts that are not disk images (its admin guide, "Available URL
// Formats"), the reference must name a manifest by digest. ok is false
// when the boot file is not an oci:// reference.
func BootFileOCI(ctx context.Context, ii map[string]any, ni NodeInfo, part string) (src Source, ok bool, err error) {
	v, _ := ii[part].(string)
	if !oci.IsOCI(v) {
		return Source{}, false, nil
	}
	ref, err := oci.Parse(v)
	if err != nil {
		return Source{}, true, err
	}
	if ref.Digest == "" {
		return Source{}, true, &oci.Error{Kind: oci.ErrInvalid, Msg: fmt.Sprintf("The requested image (%s) was not specific. Please supply a full URL mapping to the manifest to be utilized for the file download.", strings.TrimSpace(v))}
	}
	opts, err := ociOptions(ii, ni, ref)
	if err != nil {
		return Source{}, true, err
	}
	opts.CPUArch = "" // a manifest by digest: nothing to choose
	trust, _ := TrustOf(ni.DriverInfo)
	rctx, cancel := context.WithTimeout(ctx, ociTimeout)
	defer cancel()
	img, err := oci.Resolve(rctx, v, opts)
	if err != nil {
		return Source{}, true, err
	}
	o := Origin{OCI: &img, ociOpts: opts, Size: img.Size, DownloadSource: DownloadHTTP}
	o.Algo, o.Hash = img.Algo(), img.Hex()
	return o.TrustedSource(nil, nil, trust), true, nil
}
