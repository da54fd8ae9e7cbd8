package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/oci"
)

// Values of instance_info/image_download_source.
const (
	// DownloadHTTP: the boot HTTP service caches the image and the agent
	// fetches it from there (Ironic's image_download_source=http). The
	// default for Glance images.
	DownloadHTTP = "http"
	// DownloadDirect: the agent fetches image_source itself. The default for
	// http(s) URLs, as ironflow always did.
	DownloadDirect = "direct"
)

// Origin is where a node's image comes from and what it must hash to,
// from its instance_info and, for a Glance image, Glance's record.
type Origin struct {
	GlanceID       string // set for a Glance image
	URL            string // the image URL for a plain http(s) image_source
	Algo, Hash     string
	DiskFormat     string
	ImageType      string // Glance's img_type, when it has one
	Size           int64
	DownloadSource string // DownloadHTTP or DownloadDirect

	// Partition: Glance says the image is a partition image (img_type, or
	// kernel_id/ramdisk_id); KernelID and RamdiskID are those properties.
	Partition           bool
	KernelID, RamdiskID string

	// OCI is the disk layer an oci:// image_source resolved to; ociOpts
	// reach its registry (with the node's pull secret: never logged or
	// returned).
	OCI     *oci.Image
	ociOpts oci.Options
	// ociDirect is how the agent fetches the layer itself, for
	// image_download_source=direct (a secret: see DirectOCI).
	ociDirect *oci.Direct
}

// DirectOCI is, for an oci:// image with image_download_source=direct,
// the layer's URL in the registry and the short-lived bearer token the
// agent fetches it with (oci.DirectAccess). The token is a secret: it is
// handed to the agent by the activity that sends the deploy step and
// never logged, recorded in a workflow history or returned by the API.
func (o Origin) DirectOCI() (oci.Direct, bool) {
	if o.ociDirect == nil {
		return oci.Direct{}, false
	}
	return *o.ociDirect, true
}

// NodeInfo is what Locate reads of a node beyond instance_info for an
// oci:// image_source: driver_info (image_verify_ca, image_pull_secret),
// properties (cpu_arch) and driver_internal_info (the manifest pinned when
// the deploy started, KeyOCIPin).
type NodeInfo struct {
	DriverInfo, Properties, DriverInternalInfo map[string]any
}

// KeyOCIPin is the driver_internal_info key holding what an oci://
// image_source resolved to when the deploy started: {"source": the
// image_source, "manifest": oci://registry/repo@digest, "layer": digest,
// "disk_format": ...}. The image cache and the agent then fetch that
// manifest's layer even if the tag has moved since (as Ironic keeps
// driver_internal_info's image_source override).
const KeyOCIPin = "oci_image"

// A pin says who resolved it (PinnedBy: PinnedByValidate or
// PinnedByDeploy) and when (PinnedAt, RFC 3339). node validate pins the
// manifest it resolved for a node that can be deployed; the next deploy
// within OCIValidatePinMaxAge fetches that manifest even if the tag has
// moved since (docs/oci-images.md, "What a deploy fetches").
const (
	PinnedBy         = "pinned_by"
	PinnedAt         = "pinned_at"
	PinnedByValidate = "validate"
	PinnedByDeploy   = "deploy"
)

// OCIValidatePinMaxAge: a validate's pin older than this is not used; the
// deploy resolves the reference afresh (and its history says so).
const OCIValidatePinMaxAge = 24 * time.Hour

// ValidatedPin is the pin node validate left in driver_internal_info for
// image_source src, resolved within OCIValidatePinMaxAge of now; nil when
// there is none. stale reports a validate pin of src that is too old.
func ValidatedPin(dii map[string]any, src string, now time.Time) (pin map[string]any, stale bool) {
	p, _ := dii[KeyOCIPin].(map[string]any)
	if p == nil || p[PinnedBy] != PinnedByValidate {
		return nil, false
	}
	ref, err := oci.Parse(src)
	if err != nil || p["source"] != ref.String() {
		return nil, false
	}
	at, err := time.Parse(time.RFC3339, fmt.Sprint(p[PinnedAt]))
	if err != nil || now.Sub(at) > OCIValidatePinMaxAge {
		return nil, true
	}
	return p, false
}

// ociTimeout bounds a resolution: a registry that does not answer in time
// is reported unavailable (and the activity retried).
const ociTimeout = 30 * time.Second

// ErrNoGlance: image_source names a Glance image, but no Glance is configured.
var ErrNoGlance = errors.New("no Glance configured (--glance-url)")

// Locate reads a node's instance_info: a Glance image (UUID or
// glance://UUID) is resolved through g, which refuses images that cannot be
// deployed; an http(s) URL is taken with the checksum instance_info gives.
// ok is false when image_source is neither (an empty or other scheme: the
// agent's own checks report it).
func Locate(ctx context.Context, g *glance.Client, ii map[string]any) (o Origin, ok bool, err error) {
	return LocateNode(ctx, g, ii, NodeInfo{})
}

// LocateNode is Locate with what an oci:// image_source needs of the node
// besides instance_info.
func LocateNode(ctx context.Context, g *glance.Client, ii map[string]any, ni NodeInfo) (o Origin, ok bool, err error) {
	str := func(k string) string { v, _ := ii[k].(string); return strings.TrimSpace(v) }
	src := str("image_source")
	o.DownloadSource = strings.ToLower(str("image_download_source"))
	switch o.DownloadSource {
	case "", DownloadHTTP, DownloadDirect:
	default:
		return o, false, fmt.Errorf("instance_info/image_download_source %q is not one of http, direct", o.DownloadSource)
	}
	if id, isGlance := glance.ImageID(src); isGlance {
		if g == nil {
			return o, false, fmt.Errorf("image_source %s is a Glance image: %w", src, ErrNoGlance)
		}
		img, err := g.Resolve(ctx, id)
		if err != nil {
			return o, false, err
		}
		o.GlanceID = img.ID
		o.Algo, o.Hash = img.ChecksumOf()
		o.DiskFormat, o.ImageType, o.Size = img.DiskFormat, img.ImageType, img.Size
		o.Partition, o.KernelID, o.RamdiskID = img.Partition(), img.KernelID, img.RamdiskID
		if o.DownloadSource == "" {
			o.DownloadSource = DownloadHTTP
		}
		return o, true, nil
	}
	if oci.IsOCI(src) {
		return locateOCI(ctx, src, o, ii, ni)
	}
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		return o, false, nil
	}
	o.URL = src
	o.DiskFormat = str("image_disk_format")
	if o.DownloadSource == "" {
		o.DownloadSource = DownloadDirect
	}
	if o.DownloadSource == DownloadHTTP {
		o.Algo, o.Hash = strings.ToLower(str("image_os_hash_algo")), strings.ToLower(str("image_os_hash_value"))
		if o.Hash == "" {
			o.Algo, o.Hash = "", strings.ToLower(str("image_checksum"))
			switch len(o.Hash) {
			case 32:
				o.Algo = "md5"
			case 64:
				o.Algo = "sha256"
			case 128:
				o.Algo = "sha512"
			}
		}
		if o.Algo == "" || strings.Contains(o.Hash, "/") {
			return o, false, errors.New("image_download_source=http needs the image's checksum as a value (image_os_hash_algo and image_os_hash_value, or image_checksum), not a URL: the cache verifies what it serves")
		}
	}
	return o, true, nil
}

// Source is the cache entry of the origin; hc fetches plain URLs.
func (o Origin) Source(g *glance.Client, hc *http.Client) Source {
	return o.TrustedSource(g, hc, Trust{})
}

// TrustedSource is Source for a node whose image server is verified as t
// says (driver_info/image_verify_ca); hc nil means t.Client(). Glance is
// reached with the worker's Glance client, whose trust is its own.
func (o Origin) TrustedSource(g *glance.Client, hc *http.Client, t Trust) Source {
	s := Source{Algo: o.Algo, Hash: o.Hash, Size: o.Size, DiskFormat: o.DiskFormat}
	if o.OCI != nil {
		// Keyed by the layer's digest: two tags of one image, or one
		// image for a hundred nodes, are one download.
		s.Key = "oci:" + o.OCI.Layer
		s.Trust = t.Fingerprint()
		img, opts := *o.OCI, o.ociOpts
		s.Fetch = func(ctx context.Context) (io.ReadCloser, error) { return oci.Open(ctx, img, opts) }
		return s
	}
	if o.GlanceID != "" {
		s.Key = "glance:" + o.GlanceID
		id := o.GlanceID
		s.Fetch = func(ctx context.Context) (io.ReadCloser, error) { return g.Download(ctx, id) }
		return s
	}
	s.Trust = t.Fingerprint()
	// The key names the URL by its hash: keys show in errors and logs, and
	// a URL may carry a signature or credentials.
	sum := sha256.Sum256([]byte(o.URL))
	s.Key = "url:" + hex.EncodeToString(sum[:8]) + "#" + o.Algo + ":" + o.Hash
	url := o.URL
	s.Fetch = func(ctx context.Context) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		if t.Skip && strings.HasPrefix(url, "https://") {
			slog.Warn("image cache: the image server's certificate is not verified (driver_info/image_verify_ca is False)", "key", s.Key)
		}
		hc := hc
		if hc == nil {
			// A transport of its own per download (a cache miss is
			// rare), closed with it.
			hc = t.Client()
			defer hc.CloseIdleConnections()
		}
		resp, err := hc.Do(req)
		if err != nil {
			if IsUntrusted(err) {
				return nil, untrustedError(err)
			}
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("GET image: %s", resp.Status)
		}
		return resp.Body, nil
	}
	return s
}

// CachePath is the path, below the boot HTTP service, where a node's agent
// fetches its cached image: it names the node only, never an origin or a
// credential.
func CachePath(nodeUUID string) string { return "/cache/" + nodeUUID + "/image" }

// ChecksumPath is where the agent reads the checksum of what CachePath
// serves, a checksums file of one line: with ForceRaw the image served is
// the raw conversion, whose checksum only the cache knows.
func ChecksumPath(nodeUUID string) string { return "/cache/" + nodeUUID + "/checksum" }

// Cached reports, without asking Glance, whether the agent of a node with
// this instance_info fetches its image from the cache.
func Cached(ii map[string]any) bool {
	src, _ := ii["image_source"].(string)
	ds, _ := ii["image_download_source"].(string)
	ds = strings.ToLower(strings.TrimSpace(ds))
	if _, isGlance := glance.ImageID(src); isGlance {
		return ds != DownloadDirect
	}
	if oci.IsOCI(src) {
		return ds != DownloadDirect
	}
	return ds == DownloadHTTP
}

// locateOCI resolves an oci:// image_source to its disk layer, with the
// node's pull secret and CA, and the pinned manifest if the deploy pinned
// one for this image_source. The cache serves it (image_download_source
// http, the default); the agent never holds the registry's credentials.
// With image_download_source=direct the agent fetches the layer from the
// registry with a short-lived bearer token asked for here (a registry
// that takes the pull secret itself is refused).
func locateOCI(ctx context.Context, src string, o Origin, ii map[string]any, ni NodeInfo) (Origin, bool, error) {
	if o.DownloadSource == "" {
		o.DownloadSource = DownloadHTTP
	}
	ref, err := oci.Parse(src)
	if err != nil {
		return o, false, err
	}
	opts, err := ociOptions(ii, ni, ref)
	if err != nil {
		return o, false, err
	}
	opts.DownloadSource = o.DownloadSource
	target, pinnedFormat := src, ""
	if pin, _ := ni.DriverInternalInfo[KeyOCIPin].(map[string]any); pin != nil {
		if ps, _ := pin["source"].(string); ps == ref.String() {
			if m, _ := pin["manifest"].(string); m != "" {
				target = m
				pinnedFormat, _ = pin["disk_format"].(string)
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, ociTimeout)
	defer cancel()
	img, err := oci.Resolve(rctx, target, opts)
	if err != nil {
		return o, false, err
	}
	img.Ref = ref
	if img.DiskFormat == "" {
		img.DiskFormat = pinnedFormat
	}
	o.OCI, o.ociOpts = &img, opts
	if o.DownloadSource == DownloadDirect {
		d, err := oci.DirectAccess(rctx, img, opts)
		if err != nil {
			return o, false, err
		}
		o.ociDirect = &d
	}
	o.Algo, o.Hash, o.Size = img.Algo(), img.Hex(), img.Size
	o.DiskFormat = img.DiskFormat
	if f, _ := ii["image_disk_format"].(string); o.DiskFormat == "" {
		o.DiskFormat = strings.TrimSpace(f)
	}
	return o, true, nil
}

// OCIPin is the driver_internal_info value (KeyOCIPin) that pins what o
// resolved to, nil when o is not an oci:// image.
func (o Origin) OCIPin() map[string]any {
	if o.OCI == nil {
		return nil
	}
	return map[string]any{
		"source":      o.OCI.Ref.String(),
		"manifest":    o.OCI.Manifest.String(),
		"layer":       o.OCI.Layer,
		"disk_format": o.OCI.DiskFormat,
	}
}

// ociOptions reach ref's registry for a node: its pull secret (or the
// conductor's), its image_verify_ca, its cpu_arch.
func ociOptions(ii map[string]any, ni NodeInfo, ref oci.Ref) (oci.Options, error) {
	trust, err := TrustOf(ni.DriverInfo)
	if err != nil {
		return oci.Options{}, err
	}
	cred, err := oci.NodeCredential(ii, ni.DriverInfo, ref.Registry)
	if err != nil {
		return oci.Options{}, err
	}
	hc := trust.Client()
	hc.Timeout = 0 // layers are large: the context bounds resolution
	arch, _ := ni.Properties["cpu_arch"].(string)
	return oci.Options{Credential: cred, HTTPClient: hc, CPUArch: arch}, nil
}
