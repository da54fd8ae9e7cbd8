package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/oci"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// glanceFlags say how to reach Glance, and whether the image cache converts
// qcow2 images to raw; the worker (resolution, the deploy's refusal, what
// the agent is told), the boot service (the cache's downloads) and the API
// (node validate) read the same ones.
type glanceFlags struct {
	url, auth, user, password *string
	forceRaw                  *bool
	ociAuthFile               *string
}

func addGlanceFlags(s *settings) glanceFlags {
	return glanceFlags{
		url:      s.String("glance-url", "", "Glance's endpoint, e.g. http://glance:9292, for image_source given as a Glance image UUID (empty: none)"),
		auth:     s.String("glance-auth", glance.AuthNone, "how to authenticate to Glance: none or http_basic"),
		user:     s.String("glance-user", "", "user for --glance-auth http_basic"),
		password: s.String("glance-password", "", "password for --glance-auth http_basic (prefer the environment)"),
		// Off by default, unlike Ironic: its agent converts qcow2 in
		// memory, ironflow's streams it in bounded memory at about the
		// speed of raw, so converting in the cache only costs the
		// virtual size on the cache's disk, the time to convert before
		// the first byte, and the zeros sent to every agent.
		ociAuthFile: s.String("oci-auth-file", "", "a container tool's config.json ({\"auths\": {registry: {\"auth\": base64 of user:password}}}): registry credentials for oci:// image_sources without an image_pull_secret (docs/oci-images.md); set it alike on the API, the worker and the boot service"),
		forceRaw:    s.Bool("force-raw-images", false, "the boot service's image cache converts qcow2 images to raw once and serves the raw disk (image_download_source=http); set it alike on the worker and the boot service"),
	}
}

// client is nil when no Glance is configured.
func (g glanceFlags) client() (*glance.Client, error) {
	if g.ociAuthFile != nil {
		oci.AuthFile = *g.ociAuthFile
	}
	if g.url == nil || *g.url == "" {
		return nil, nil
	}
	return glance.New(glance.Config{URL: *g.url, Auth: *g.auth, User: *g.user, Password: *g.password})
}

// setAPI gives the API's validate the Glance client, if one is configured.
func (g glanceFlags) setAPI(cfg *apiserver.Config) error {
	gc, err := g.client()
	if err != nil || gc == nil {
		return err
	}
	cfg.Glance = gc
	return nil
}

// cacheFlags are the boot service's image cache settings.
type cacheFlags struct {
	dir, size *string
}

func addCacheFlags(s *settings) cacheFlags {
	return cacheFlags{
		dir:  s.String("image-cache-dir", "", "where the boot service caches instance images for image_download_source=http (default <data-dir>/image-cache)"),
		size: s.String("image-cache-size", "50GiB", "bound of the image cache (bytes, or with a suffix KiB, MiB, GiB, TiB; 0: unbounded)"),
	}
}

// parseSize reads 1234, 20GiB, 20G (binary units either way).
func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes or a number with KiB, MiB, GiB or TiB", v)
	}
	return n * mult, nil
}

// imageCacheHandler is the boot service's /cache/{uuid}/image: the image a
// node in a deploy state deploys, from the cache.
func imageCacheHandler(f cacheFlags, g glanceFlags, dataDir string, st *store.Store, log *slog.Logger) (http.Handler, error) {
	dir := *f.dir
	if dir == "" {
		dir = filepath.Join(dataDir, "image-cache")
	}
	size, err := parseSize(*f.size)
	if err != nil {
		return nil, fmt.Errorf("--image-cache-size: %w", err)
	}
	gc, err := g.client()
	if err != nil {
		return nil, err
	}
	c, err := imagecache.Open(dir, size)
	if err != nil {
		return nil, err
	}
	c.ForceRaw = *g.forceRaw
	deploying := func(ctx context.Context, nodeUUID string) (*store.Node, error) {
		n, err := st.GetNode(ctx, nodeUUID)
		if err != nil {
			return nil, err
		}
		if n.ProvisionState != provision.Deploying && n.ProvisionState != provision.DeployWait {
			return nil, fmt.Errorf("node %s is not deploying", nodeUUID)
		}
		return n, nil
	}
	srv := &imagecache.Server{Cache: c, Log: log, Resolve: func(ctx context.Context, nodeUUID string) (imagecache.Source, error) {
		n, err := deploying(ctx, nodeUUID)
		if err != nil {
			return imagecache.Source{}, err
		}
		o, ok, err := imagecache.LocateNode(ctx, gc, n.InstanceInfo, imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties, DriverInternalInfo: n.DriverInternalInfo})
		if err != nil {
			return imagecache.Source{}, err
		}
		if !ok || o.DownloadSource != imagecache.DownloadHTTP {
			return imagecache.Source{}, fmt.Errorf("node %s does not deploy a cached image", nodeUUID)
		}
		trust, err := imagecache.TrustOf(n.DriverInfo)
		if err != nil {
			return imagecache.Source{}, err
		}
		return o.TrustedSource(gc, nil, trust), nil
	}}
	// A partition image's kernel and ramdisk that are Glance images.
	srv.ResolveBootFile = func(ctx context.Context, nodeUUID, part string) (imagecache.Source, error) {
		n, err := deploying(ctx, nodeUUID)
		if err != nil {
			return imagecache.Source{}, err
		}
		ni := imagecache.NodeInfo{DriverInfo: n.DriverInfo, Properties: n.Properties, DriverInternalInfo: n.DriverInternalInfo}
		if src, isOCI, err := imagecache.BootFileOCI(ctx, n.InstanceInfo, ni, part); isOCI {
			return src, err
		}
		o, _, err := imagecache.LocateNode(ctx, gc, n.InstanceInfo, ni)
		if err != nil {
			return imagecache.Source{}, err
		}
		id := imagecache.BootFileID(n.InstanceInfo, o, part)
		if id == "" || !imagecache.BootFileCached(n.InstanceInfo) {
			return imagecache.Source{}, fmt.Errorf("node %s has no cached %s", nodeUUID, part)
		}
		return imagecache.BootFileSource(ctx, gc, id)
	}
	return srv, nil
}
