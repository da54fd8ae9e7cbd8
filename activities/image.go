package activities

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/oci"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// ociPinEvent is the history line of the manifest a deploy fetches: the
// one validate resolved (and, when the tag has moved since, where it
// points now), or the one resolved at the start.
func (a *Activities) ociPinEvent(ctx context.Context, n *store.Node, pin, validated map[string]any, stale bool) string {
	switch {
	case validated != nil:
		msg := fmt.Sprintf("Deploying %s as node validate resolved it at %s: manifest %s, layer %s", pin["source"], validated[imagecache.PinnedAt], pin["manifest"], pin["layer"])
		// Where the reference points now: resolved alone (no direct
		// download's token is asked for this line).
		ii := maps.Clone(n.InstanceInfo)
		delete(ii, "image_download_source")
		now, _, err := imagecache.LocateNode(ctx, a.Config.Glance, ii, imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties})
		if err == nil && now.OCI != nil && now.OCI.Manifest.String() != pin["manifest"] {
			msg += fmt.Sprintf(" (the reference now resolves to manifest %s; the validated one is deployed)", now.OCI.Manifest)
		}
		return msg
	case stale:
		return fmt.Sprintf("Deploying %s as resolved now: manifest %s, layer %s (node validate's resolution is older than %s)", pin["source"], pin["manifest"], pin["layer"], imagecache.OCIValidatePinMaxAge)
	}
	return fmt.Sprintf("Deploying %s as resolved at the start of the deploy: manifest %s, layer %s", pin["source"], pin["manifest"], pin["layer"])
}

// checkImage refuses, before the agent boots, a deploy whose Glance image
// cannot be deployed (missing, not active, no checksum), or whose
// image_download_source cannot work: Ironic validates the image when a
// deploy starts. Glance's credentials come from the worker's configuration,
// never from workflow history.
func (a *Activities) checkImage(ctx context.Context, n *store.Node) error {
	if _, err := imageTrust(n); err != nil {
		return err
	}
	// An oci:// image is resolved afresh and pinned for the deploy: the
	// cache and the agent fetch what it resolved to now; or, when node
	// validate resolved it recently, what validate resolved
	// (imagecache.ValidatedPin), and the history says which.
	ni := imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties}
	src, _ := n.InstanceInfo["image_source"].(string)
	validated, stale := imagecache.ValidatedPin(n.DriverInternalInfo, src, time.Now())
	if validated != nil {
		ni.DriverInternalInfo = map[string]any{imagecache.KeyOCIPin: validated}
	}
	o, _, err := imagecache.LocateNode(ctx, a.Config.Glance, n.InstanceInfo, ni)
	if err != nil {
		return imageErr(n.UUID, err)
	}
	if pin := o.OCIPin(); pin != nil {
		pin[imagecache.PinnedBy], pin[imagecache.PinnedAt] = imagecache.PinnedByDeploy, time.Now().UTC().Format(time.RFC3339)
		_ = a.history(ctx, n.UUID, "", "deploy", a.ociPinEvent(ctx, n, pin, validated, stale))
		if err := a.Store.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{imagecache.KeyOCIPin: pin}); err != nil {
			return storeErr(err, "pin the OCI image of node %s", n.UUID)
		}
		n.DriverInternalInfo = maps.Clone(n.DriverInternalInfo)
		if n.DriverInternalInfo == nil {
			n.DriverInternalInfo = map[string]any{}
		}
		n.DriverInternalInfo[imagecache.KeyOCIPin] = pin
		a.Log.Info("deploy: oci image resolved", "node", n.UUID, "source", pin["source"], "manifest", pin["manifest"], "layer", pin["layer"])
	}
	// A partition image's kernel and ramdisk from Glance or a registry
	// must be there too.
	for _, part := range imagecache.BootParts {
		if _, isOCI, err := imagecache.BootFileOCI(ctx, n.InstanceInfo, imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties}, part); isOCI {
			if err != nil {
				return imageErr(n.UUID, fmt.Errorf("%s: %w", part, err))
			}
			continue
		}
		if id := imagecache.BootFileID(n.InstanceInfo, o, part); id != "" {
			if _, err := imagecache.BootFileSource(ctx, a.Config.Glance, id); err != nil {
				return imageErr(n.UUID, fmt.Errorf("%s: %w", part, err))
			}
		}
	}
	return nil
}

// partitionImage tells whether the node deploys a partition image:
// instance_info/image_type, else, for a Glance image, Glance's img_type or
// kernel_id/ramdisk_id (Ironic's images.is_whole_disk_image).
func (a *Activities) partitionImage(ctx context.Context, n *store.Node) (bool, error) {
	if isPartitionImage(n) {
		return true, nil
	}
	if t, _ := n.InstanceInfo["image_type"].(string); t != "" {
		return false, nil
	}
	src, _ := n.InstanceInfo["image_source"].(string)
	if _, isGlance := glance.ImageID(src); !isGlance {
		return false, nil
	}
	o, _, err := imagecache.Locate(ctx, a.Config.Glance, n.InstanceInfo)
	if err != nil {
		return false, imageErr(n.UUID, err)
	}
	return imagecache.PartitionImage(n.InstanceInfo, o), nil
}

func imageErr(node string, err error) error {
	if errors.Is(err, glance.ErrUnavailable) || errors.Is(err, oci.Unavailable) {
		return err // Glance or the registry did not answer: retried
	}
	return invalidConfig("node %s: %v", node, err)
}

// agentImageInfo is the node's instance_info as the agent reads it: a Glance
// image becomes its URL (the boot HTTP service's cache, or Glance's file URL
// for image_download_source=direct), Glance's checksum and disk format; an
// http(s) image with image_download_source=http becomes the cache's URL.
// The URL of the cache names the node only: no origin, no credential.
func (a *Activities) agentImageInfo(ctx context.Context, n *store.Node) (map[string]any, error) {
	o, ok, err := imagecache.LocateNode(ctx, a.Config.Glance, n.InstanceInfo, nodeInfo(n))
	if err != nil {
		return nil, imageErr(n.UUID, err)
	}
	ii := maps.Clone(n.InstanceInfo)
	// The agent never holds the registry's credentials: it fetches an
	// oci:// image from the cache, or with a short-lived token.
	delete(ii, "image_pull_secret")
	changed, err := a.agentBootFiles(ctx, n, o, ii)
	if err != nil {
		return nil, err
	}
	if d, direct := o.DirectOCI(); direct {
		// image_download_source=direct: the agent fetches the layer from
		// the registry with a short-lived bearer token (Ironic's
		// image_request_authorization_secret, sent to the agent as
		// image_request_authorization, base64 of the header's value). It
		// is in this command to the agent only: never in a history.
		ii["image_source"] = d.URL
		if d.Authorization != "" {
			ii["image_request_authorization"] = base64.StdEncoding.EncodeToString([]byte(d.Authorization))
		}
		ii["image_os_hash_algo"], ii["image_os_hash_value"] = o.Algo, o.Hash
		delete(ii, "image_checksum")
		if o.DiskFormat != "" {
			ii["image_disk_format"] = o.DiskFormat
		}
		return ii, nil
	}
	if !ok || (o.GlanceID == "" && o.DownloadSource == imagecache.DownloadDirect) {
		if changed {
			return ii, nil
		}
		return n.InstanceInfo, nil
	}
	if o.DownloadSource == imagecache.DownloadHTTP {
		ii["image_source"] = strings.TrimRight(a.Config.BootURL, "/") + imagecache.CachePath(n.UUID)
	} else {
		if err := a.directGlance(n); err != nil {
			return nil, err
		}
		ii["image_source"] = a.Config.Glance.FileURL(o.GlanceID)
	}
	if o.GlanceID != "" {
		ii["image_os_hash_algo"], ii["image_os_hash_value"] = o.Algo, o.Hash
		delete(ii, "image_checksum")
		if o.DiskFormat != "" {
			ii["image_disk_format"] = o.DiskFormat
		}
		if _, set := ii["image_type"]; !set {
			switch {
			case o.Partition:
				ii["image_type"] = "partition"
			case o.ImageType != "":
				ii["image_type"] = o.ImageType
			}
		}
	}
	if o.OCI != nil {
		// The layer's digest is its checksum (Ironic ignores image_checksum
		// for oci:// sources).
		ii["image_os_hash_algo"], ii["image_os_hash_value"] = o.Algo, o.Hash
		delete(ii, "image_checksum")
		if o.DiskFormat != "" {
			ii["image_disk_format"] = o.DiskFormat
		}
	}
	a.rawFromCache(ii, o, n.UUID)
	return ii, nil
}

// nodeInfo is what imagecache.LocateNode reads of n besides instance_info.
func nodeInfo(n *store.Node) imagecache.NodeInfo {
	return imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties, DriverInternalInfo: n.DriverInternalInfo}
}

// directGlance refuses image_download_source=direct when the agent would
// need Glance's credentials to fetch from it.
func (a *Activities) directGlance(n *store.Node) error {
	if a.Config.GlanceAuth != "" && a.Config.GlanceAuth != glance.AuthNone {
		return invalidConfig("node %s: image_download_source=direct would need the agent to hold Glance's credentials: use image_download_source=http", n.UUID)
	}
	return nil
}

// agentBootFiles puts into ii the URLs the agent fetches a partition image's
// kernel and ramdisk from when they are Glance images (instance_info/kernel
// and ramdisk naming one, or Glance's kernel_id and ramdisk_id, as Ironic's
// build_instance_info_for_deploy maps them): the boot service's cache, or
// Glance's file URL for image_download_source=direct. It reports whether it
// set any.
func (a *Activities) agentBootFiles(ctx context.Context, n *store.Node, o imagecache.Origin, ii map[string]any) (bool, error) {
	changed := false
	for _, part := range imagecache.BootParts {
		// An oci:// kernel or ramdisk: always through the cache, which
		// holds the registry's credentials (docs/oci-images.md).
		if _, isOCI, err := imagecache.BootFileOCI(ctx, n.InstanceInfo, nodeInfo(n), part); isOCI {
			if err != nil {
				return false, imageErr(n.UUID, fmt.Errorf("%s: %w", part, err))
			}
			ii[part] = strings.TrimRight(a.Config.BootURL, "/") + imagecache.CachedBootPath(n.UUID, part)
			changed = true
			continue
		}
		id := imagecache.BootFileID(n.InstanceInfo, o, part)
		if id == "" {
			continue
		}
		if _, err := imagecache.BootFileSource(ctx, a.Config.Glance, id); err != nil {
			return false, imageErr(n.UUID, fmt.Errorf("%s: %w", part, err))
		}
		if imagecache.BootFileCached(n.InstanceInfo) {
			ii[part] = strings.TrimRight(a.Config.BootURL, "/") + imagecache.CachedBootPath(n.UUID, part)
		} else {
			if err := a.directGlance(n); err != nil {
				return false, err
			}
			ii[part] = a.Config.Glance.FileURL(id)
		}
		changed = true
	}
	return changed, nil
}

// agentDeployNode is agentNode with the image as the agent fetches it.
func (a *Activities) agentDeployNode(ctx context.Context, n *store.Node) (map[string]any, error) {
	m := agentNode(n)
	ii, err := a.agentImageInfo(ctx, n)
	if err != nil {
		return nil, err
	}
	m["instance_info"] = ii
	return m, nil
}

// deploying reports whether the node's workflow deploys an image (deploy or
// rebuild), so that the image is checked before the agent boots.
func deploying(n *store.Node) bool {
	return n.ProvisionState == provision.Deploying
}

// cacheProgress is the boot service's download of the node's image, as
// "image cache: <downloaded>/<total> bytes", while one is in flight.
func (a *Activities) cacheProgress(ctx context.Context, n *store.Node) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := strings.TrimRight(a.Config.BootURL, "/") + "/cache/" + n.UUID + "/progress"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var rep imagecache.ProgressReport
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rep) != nil || !rep.Downloading {
		return "", false
	}
	return fmt.Sprintf("image cache: %d/%d bytes", rep.Downloaded, rep.Total), true
}
