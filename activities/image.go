package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// checkImage refuses, before the agent boots, a deploy whose Glance image
// cannot be deployed (missing, not active, no checksum), or whose
// image_download_source cannot work: Ironic validates the image when a
// deploy starts. Glance's credentials come from the worker's configuration,
// never from workflow history.
func (a *Activities) checkImage(ctx context.Context, n *store.Node) error {
	if _, err := imageTrust(n); err != nil {
		return err
	}
	_, _, err := imagecache.Locate(ctx, a.Config.Glance, n.InstanceInfo)
	if err != nil {
		return imageErr(n.UUID, err)
	}
	return nil
}

func imageErr(node string, err error) error {
	if errors.Is(err, glance.ErrUnavailable) {
		return err // Glance did not answer: retried
	}
	return invalidConfig("node %s: %v", node, err)
}

// agentImageInfo is the node's instance_info as the agent reads it: a Glance
// image becomes its URL (the boot HTTP service's cache, or Glance's file URL
// for image_download_source=direct), Glance's checksum and disk format; an
// http(s) image with image_download_source=http becomes the cache's URL.
// The URL of the cache names the node only: no origin, no credential.
func (a *Activities) agentImageInfo(ctx context.Context, n *store.Node) (map[string]any, error) {
	o, ok, err := imagecache.Locate(ctx, a.Config.Glance, n.InstanceInfo)
	if err != nil {
		return nil, imageErr(n.UUID, err)
	}
	if !ok || (o.GlanceID == "" && o.DownloadSource == imagecache.DownloadDirect) {
		return n.InstanceInfo, nil
	}
	ii := maps.Clone(n.InstanceInfo)
	if o.DownloadSource == imagecache.DownloadHTTP {
		ii["image_source"] = strings.TrimRight(a.Config.BootURL, "/") + imagecache.CachePath(n.UUID)
	} else {
		if a.Config.GlanceAuth != "" && a.Config.GlanceAuth != glance.AuthNone {
			return nil, invalidConfig("node %s: image_download_source=direct would need the agent to hold Glance's credentials: use image_download_source=http", n.UUID)
		}
		ii["image_source"] = a.Config.Glance.FileURL(o.GlanceID)
	}
	if o.GlanceID != "" {
		ii["image_os_hash_algo"], ii["image_os_hash_value"] = o.Algo, o.Hash
		delete(ii, "image_checksum")
		if o.DiskFormat != "" {
			ii["image_disk_format"] = o.DiskFormat
		}
		if _, set := ii["image_type"]; !set && o.ImageType != "" {
			ii["image_type"] = o.ImageType
		}
	}
	a.rawFromCache(ii, o, n.UUID)
	return ii, nil
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
	return n.ProvisionState == workflows.StateDeploying
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
