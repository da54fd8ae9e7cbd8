package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// imageParams is what write_image needs, merged from the step's args
// (IPA's image_info or flat instance_info names) and the node's instance_info.
type imageParams struct {
	URL         string
	Checksum    string
	HashAlgo    string
	HashValue   string
	DiskFormat  string
	ConfigDrive string
	// Client downloads the image, its checksum file and config drive,
	// trusting the image server as image_verify_ca says (nil: the
	// agent's download client).
	Client *http.Client
	// Authorization is the header value the image's own URL is fetched
	// with: image_request_authorization (base64 of it), as IPA's
	// _load_supplied_authorization reads it; the conductor gives a
	// short-lived registry token for an oci:// image downloaded directly.
	Authorization string
}

// downloadClient is the client for img's downloads.
func (a *Agent) downloadClient(img imageParams) *http.Client {
	hc := img.Client
	if hc == nil {
		hc = a.cfg.DownloadClient
	}
	if img.Authorization == "" {
		return hc
	}
	u, err := url.Parse(img.URL)
	if err != nil {
		return hc
	}
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &authorizing{next: next, url: u, value: img.Authorization}
	return &c
}

// authorizing sends the Authorization header with requests for the
// image's URL only: not its checksum file, not the config drive, not a
// redirect to another place (a registry's blob storage).
type authorizing struct {
	next  http.RoundTripper
	url   *url.URL
	value string
}

func (a *authorizing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == a.url.Scheme && req.URL.Host == a.url.Host && req.URL.Path == a.url.Path && req.Header.Get("Authorization") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", a.value)
	}
	return a.next.RoundTrip(req)
}

// requestAuthorization decodes image_request_authorization (standard
// base64 of the header's value, as Ironic sends it); "" when absent or
// malformed.
func requestAuthorization(v string) string {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := m[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

func mapOf(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

// resolveImageParams accepts, in order of precedence: the step args in flat
// instance_info names (image_source, image_checksum, image_os_hash_*,
// image_disk_format, configdrive), IPA's args.image_info {urls, checksum,
// os_hash_algo, os_hash_value, disk_format}, and node.instance_info.
func resolveImageParams(node, args map[string]any) imageParams {
	info := mapOf(args, "image_info")
	inst := mapOf(node, "instance_info")
	var p imageParams
	for _, m := range []map[string]any{args, info, inst} {
		if m == nil {
			continue
		}
		if p.URL == "" {
			p.URL = str(m, "image_source", "image_url", "url")
			if p.URL == "" {
				if urls, ok := m["urls"].([]any); ok && len(urls) > 0 {
					p.URL, _ = urls[0].(string)
				}
			}
		}
		if p.HashAlgo == "" && p.HashValue == "" {
			p.HashAlgo = str(m, "image_os_hash_algo", "os_hash_algo")
			p.HashValue = str(m, "image_os_hash_value", "os_hash_value")
		}
		if p.Checksum == "" {
			p.Checksum = str(m, "image_checksum", "checksum")
		}
		if p.DiskFormat == "" {
			p.DiskFormat = str(m, "image_disk_format", "disk_format")
		}
		if p.ConfigDrive == "" {
			p.ConfigDrive = str(m, "configdrive")
		}
		if p.Authorization == "" {
			p.Authorization = requestAuthorization(str(m, "image_request_authorization"))
		}
	}
	return p
}

func (a *Agent) nodeOrLookup(node map[string]any) map[string]any {
	if node != nil {
		return node
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupNode
}

// cacheNode keeps the node a deploy step came with as the one later
// commands without a node use (install_bootloader), as IPA's
// hardware.cache_node does: the conductor's view of instance_info (the
// image and, for a partition image, the kernel and ramdisk URLs it made
// from Glance's record) is newer than the lookup's.
func (a *Agent) cacheNode(node map[string]any) {
	if node == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if uuid, _ := node["uuid"].(string); a.nodeUUID != "" && uuid != a.nodeUUID {
		return
	}
	a.lookupNode = node
}

// writeImage is the write_image deploy step: choose the root device, stream
// the image onto it verifying its checksum, fix the GPT, add the config
// drive, sync. On failure after the first byte is written the ends of the
// disk are wiped so that nothing half-written can boot.
func (a *Agent) writeImage(ctx context.Context, cmd *command, node, args map[string]any) (any, error) {
	node = a.nodeOrLookup(node)
	p := resolveImageParams(node, args)
	if p.URL == "" {
		return nil, errors.New("write_image: no image URL (instance_info.image_source or image_info.urls)")
	}
	if !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
		return nil, fmt.Errorf("write_image: image URL %s is not http(s)", redactURL(p.URL))
	}
	partition := isPartitionImage(node, args)
	if partition && strings.EqualFold(p.DiskFormat, "iso") {
		return nil, errors.New("write_image: a partition image cannot be an ISO: it is a root filesystem image (raw)")
	}
	var pp partitionParams
	if partition {
		var err error
		if pp, err = resolvePartitionParams(node, args); err != nil {
			return nil, fmt.Errorf("write_image: %w", err)
		}
	}
	if err := checkDeclaredFormat(p.DiskFormat); err != nil {
		return nil, fmt.Errorf("write_image: %w", err)
	}
	log := a.log.With("node", a.NodeUUID(), "step", "write_image")
	hc, err := a.imageClient(args, log)
	if err != nil {
		return nil, fmt.Errorf("write_image: %w", err)
	}
	if hc != a.cfg.DownloadClient {
		defer hc.CloseIdleConnections()
		p.Client = hc
	}
	ck, err := resolveChecksum(ctx, hc, p, a.cfg.Download)
	if err != nil {
		return nil, fmt.Errorf("write_image: %w", err)
	}
	bd, err := a.rootDevice(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("write_image: %w", err)
	}
	dev, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return nil, fmt.Errorf("write_image: open %s: %w", bd.Name, err)
	}
	defer dev.Close()

	log = log.With("device", bd.Name)
	if partition {
		return a.writePartitionImage(ctx, cmd, pp, p, ck, bd, dev, log)
	}
	log.Info("writing image", "image", redactURL(p.URL), "checksum_algo", ck.Algo)
	start := time.Now()
	var lastPublish time.Time
	res, err := streamImageAs(ctx, a.downloadClient(p), p.URL, p.DiskFormat, ck, dev, dev.Size(), a.cfg.Download, func(written, downloaded, total int64) {
		// Publishing is a lock and an allocation: a few times a second is
		// plenty for a poller.
		if now := time.Now(); now.Sub(lastPublish) > 100*time.Millisecond || (total > 0 && downloaded == total) {
			lastPublish = now
			cmd.SetResult(map[string]any{"progress": client.Progress{BytesWritten: written, BytesDownloaded: downloaded, TotalBytes: max(total, 0), Stage: "writing image"}})
		}
	})
	if err != nil {
		if res.Written > 0 || errors.Is(err, ErrChecksumMismatch) {
			if werr := wipeEnds(dev); werr != nil {
				log.Error("wiping the disk after a failed image write failed", "err", werr)
				err = fmt.Errorf("%w (and wiping the disk failed: %v)", err, werr)
			} else {
				log.Warn("wiped the partition tables of the disk after a failed image write")
			}
		}
		return nil, err
	}
	if err := dev.Sync(); err != nil {
		return nil, fmt.Errorf("write_image: flush %s: %w", bd.Name, err)
	}
	log.Info("image written", "bytes", res.Written, "format", res.Format, "resumes", res.Resumes, "seconds", time.Since(start).Seconds())
	table, err := fixPartitionTable(dev)
	if err != nil {
		return nil, fmt.Errorf("write_image: %w", err)
	}
	out := map[string]any{
		"root_device": bd.Name, "bytes_written": res.Written, "bytes_downloaded": res.Downloaded,
		"image_format": res.Format, "checksum_algo": ck.Algo, "checksum": res.Digest, "partition_table": table,
		"progress": client.Progress{BytesWritten: res.Written, BytesDownloaded: res.Downloaded, TotalBytes: res.Downloaded, Stage: "done"},
	}
	if p.ConfigDrive != "" {
		cmd.SetResult(map[string]any{"progress": client.Progress{BytesWritten: res.Written, BytesDownloaded: res.Downloaded, TotalBytes: res.Downloaded, Stage: "config drive"}})
		data, err := loadConfigDrive(ctx, hc, p.ConfigDrive)
		if err != nil {
			return nil, fmt.Errorf("write_image: %w", err)
		}
		part, err := writeConfigDrive(dev, data)
		if err != nil {
			return nil, fmt.Errorf("write_image: %w", err)
		}
		out["configdrive_partition"] = part
		log.Info("config drive written", "partition", part, "bytes", len(data))
	}
	if err := dev.Sync(); err != nil {
		return nil, fmt.Errorf("write_image: flush %s: %w", bd.Name, err)
	}
	return out, nil
}
