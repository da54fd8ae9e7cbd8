package oci

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Media types of the OCI image specification (Ironic's oci_registry
// MEDIA_OCI_MANIFEST_V1, MEDIA_OCI_INDEX_V1) and the Docker ones a
// registry may serve for the same structures.
const (
	MediaManifest       = ocispec.MediaTypeImageManifest
	MediaIndex          = ocispec.MediaTypeImageIndex
	MediaEmpty          = ocispec.MediaTypeEmptyJSON
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// DefaultMaxMetadata bounds what is read of a manifest or an index: they
// are a few hundred bytes in Ironic's layout, and a registry that answers
// with more is refused before it costs memory.
const DefaultMaxMetadata = 1 << 20

// Options say how to reach a registry and what to pick from it.
type Options struct {
	Credential Credential
	// HTTPClient carries the TLS trust (the node's image_verify_ca or the
	// conductor's); nil: http.DefaultClient.
	HTTPClient *http.Client
	// PlainHTTP speaks http:// to the registry (tests and local mirrors).
	PlainHTTP bool
	// MaxMetadata caps the bytes of a manifest or index; 0: DefaultMaxMetadata.
	MaxMetadata int64
	// CPUArch is the node's properties/cpu_arch; "" matches any.
	CPUArch string
	// DownloadSource is instance_info/image_download_source: "local"
	// prefers qcow2, anything else raw, as Ironic's _filter_manifests.
	DownloadSource string
}

// Image is the disk image a reference resolves to.
type Image struct {
	Ref            Ref    // the reference as given
	Manifest       Ref    // the manifest chosen, by digest
	Layer          string // the disk layer's digest (algo:hex): its checksum
	Size           int64
	MediaType      string
	DiskFormat     string // qcow2, raw, or "" when the layout does not say
	Compression    string // zstd, gzip or ""
	Filename       string // org.opencontainers.image.title
	Architecture   string // the index entry's platform architecture
	IndexSelection bool   // the manifest was chosen from an index
}

// Algo and Hex split the layer digest for the cache's checksum.
func (i Image) Algo() string { a, _, _ := strings.Cut(i.Layer, ":"); return a }
func (i Image) Hex() string  { _, h, _ := strings.Cut(i.Layer, ":"); return h }

func (o Options) repository(r Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.Registry + "/" + r.Repository)
	if err != nil {
		return nil, refError(r.String(), err.Error())
	}
	repo.PlainHTTP = o.PlainHTTP
	repo.MaxMetadataBytes = o.maxMetadata()
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &auth.Client{Client: hc, Cache: auth.NewCache()}
	c.SetUserAgent("ironflow")
	if !o.Credential.Empty() {
		c.Credential = auth.StaticCredential(r.Registry, o.Credential.oras())
	}
	repo.Client = c
	return repo, nil
}

func (o Options) maxMetadata() int64 {
	if o.MaxMetadata > 0 {
		return o.MaxMetadata
	}
	return DefaultMaxMetadata
}

// manifest is the part of an OCI manifest or index ironflow reads.
type manifest struct {
	MediaType    string               `json:"mediaType"`
	ArtifactType string               `json:"artifactType"`
	Config       ocispec.Descriptor   `json:"config"`
	Layers       []ocispec.Descriptor `json:"layers"`
	Manifests    []ocispec.Descriptor `json:"manifests"`
}

// fetchManifest reads the manifest or index reference names, within the
// memory cap, and checks it against its digest.
func (o Options) fetchManifest(ctx context.Context, repo *remote.Repository, r Ref, reference string) (ocispec.Descriptor, manifest, error) {
	desc, rc, err := repo.Manifests().FetchReference(ctx, reference)
	if err != nil {
		return desc, manifest{}, o.registryError(r, err)
	}
	defer rc.Close()
	limit := o.maxMetadata()
	if desc.Size > limit {
		return desc, manifest{}, refError(r.String(), fmt.Sprintf("the manifest is %d bytes, more than the %d ironflow reads", desc.Size, limit))
	}
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return desc, manifest{}, o.registryError(r, err)
	}
	if int64(len(b)) > limit {
		return desc, manifest{}, refError(r.String(), fmt.Sprintf("the manifest is more than the %d bytes ironflow reads", limit))
	}
	if err := checkDigest(desc.Digest.String(), b); err != nil {
		return desc, manifest{}, &Error{Kind: ErrChecksum, Msg: "The supplied image checksum is invalid or does not match.", Err: err}
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return desc, manifest{}, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Invalid image href %s.", r), Err: err}
	}
	if m.MediaType == "" {
		m.MediaType = desc.MediaType
	}
	return desc, m, nil
}

// checkDigest verifies b against digest d (algo:hex).
func checkDigest(d string, b []byte) error {
	algo, want, _ := strings.Cut(d, ":")
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return fmt.Errorf("unknown digest algorithm %q", algo)
	}
	h.Write(b)
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("content hashes to %s:%s, not %s", algo, got, d)
	}
	return nil
}

// Resolve finds the disk image src names, as Ironic's
// OciImageService.identify_specific_image: a tag's index is filtered and
// ordered by _filter_manifests (architecture, then the disktype
// annotation's priority), and the first manifest of one layer wins; a
// reference by digest names its manifest (or index) directly.
func Resolve(ctx context.Context, src string, o Options) (Image, error) {
	r, err := Parse(src)
	if err != nil {
		return Image{}, err
	}
	repo, err := o.repository(r)
	if err != nil {
		return Image{}, err
	}
	desc, top, err := o.fetchManifest(ctx, repo, r, r.Reference())
	if err != nil {
		if KindOf(err) == ErrNotFound && r.Tag != "" {
			return Image{}, tagNotFound(ctx, repo, r, err)
		}
		return Image{}, err
	}
	img := Image{Ref: r}
	var candidates []entry
	switch top.MediaType {
	case MediaIndex, mediaDockerList:
		candidates = filterManifests(top.Manifests, o.DownloadSource, o.CPUArch)
		if len(candidates) == 0 {
			return Image{}, refError(r.String(), noMatch(top.Manifests, o.CPUArch))
		}
		img.IndexSelection = true
	case MediaManifest, mediaDockerManifest:
		// One manifest: its layers are the image's (identify_specific_image's
		// "single manifest" case).
		candidates = []entry{{desc: desc, m: &top}}
	default:
		return Image{}, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Invalid image href %s.", r), Err: fmt.Errorf("media type %q is neither an OCI manifest nor an index", top.MediaType)}
	}
	var skipped []string
	for _, c := range candidates {
		m := c.m
		if m == nil {
			_, fetched, err := o.fetchManifest(ctx, repo, r, c.desc.Digest.String())
			if err != nil {
				return Image{}, err
			}
			m = &fetched
		}
		if len(m.Layers) != 1 {
			// A container image (or bootc), not a disk image artifact.
			skipped = append(skipped, fmt.Sprintf("%s has %d layers", c.desc.Digest, len(m.Layers)))
			continue
		}
		layer := m.Layers[0]
		if !writable(layer.MediaType) {
			skipped = append(skipped, fmt.Sprintf("%s's layer is of media type %q, not a disk image", c.desc.Digest, layer.MediaType))
			continue
		}
		if err := layer.Digest.Validate(); err != nil {
			return Image{}, refError(r.String(), "the layer's digest is not valid: "+err.Error())
		}
		img.Manifest = r.WithDigest(c.desc.Digest.String())
		img.Layer = layer.Digest.String()
		img.Size = layer.Size
		img.MediaType = layer.MediaType
		img.DiskFormat = c.diskType
		img.Filename = layer.Annotations[ocispec.AnnotationTitle]
		if c.desc.Platform != nil {
			img.Architecture = c.desc.Platform.Architecture
		}
		switch {
		case strings.HasSuffix(layer.MediaType, "zstd"):
			img.Compression = "zstd"
		case strings.HasSuffix(layer.MediaType, "gzip"):
			img.Compression = "gzip"
		}
		return img, nil
	}
	return Image{}, refError(r.String(), "no disk image in the registry's manifests: "+strings.Join(skipped, "; "))
}

// entry is a candidate manifest: its descriptor in the index (or the
// manifest itself), its normalised disk type and priority.
type entry struct {
	desc     ocispec.Descriptor
	m        *manifest // set when already fetched
	diskType string
	priority int
}

// filterManifests is Ironic's OciImageService._filter_manifests: entries
// of another architecture are dropped (x86_64/amd64 and aarch64/arm64 are
// one), a disktype annotation ranks the entry (qcow2 first for
// image_download_source=local, raw first otherwise), an entry without one
// ranks last, an unknown disktype is dropped; qemu is qcow2, applehv is raw.
func filterManifests(ms []ocispec.Descriptor, downloadSource, cpuArch string) []entry {
	prio := map[string]int{"qcow2": 3, "qemu": 4, "raw": 1, "applehv": 2}
	if downloadSource == "local" {
		prio = map[string]int{"qcow2": 1, "qemu": 2, "raw": 3, "applehv": 4}
	}
	arches := archAliases(cpuArch)
	var out []entry
	for _, d := range ms {
		if cpuArch != "" && d.Platform != nil && d.Platform.Architecture != "" && !arches[d.Platform.Architecture] {
			continue
		}
		dt := d.Annotations["disktype"]
		e := entry{desc: d, priority: 100}
		if dt != "" {
			p, ok := prio[dt]
			if !ok {
				continue
			}
			e.priority = p
		}
		switch {
		case dt == "applehv":
			dt = "raw"
		case dt != "" && dt != "raw":
			dt = "qcow2"
		}
		e.diskType = dt
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].priority < out[j].priority })
	return out
}

func archAliases(a string) map[string]bool {
	switch a {
	case "x86_64", "amd64":
		return map[string]bool{"x86_64": true, "amd64": true}
	case "arm64", "aarch64":
		return map[string]bool{"arm64": true, "aarch64": true}
	}
	return map[string]bool{a: true}
}

// noMatch says why no index entry was taken.
func noMatch(ms []ocispec.Descriptor, cpuArch string) string {
	var arches []string
	for _, d := range ms {
		if d.Platform != nil && d.Platform.Architecture != "" {
			arches = append(arches, d.Platform.Architecture)
		}
	}
	if cpuArch != "" {
		return fmt.Sprintf("the image index has no disk image for architecture %s (it has: %s)", cpuArch, strings.Join(arches, ", "))
	}
	return "the image index has no disk image of a known disktype"
}

// writable reports whether a layer of this media type is a disk image the
// agent writes: the generic types Ironic's layout uses (Ironic's test
// fixtures carry application/zstd and application/vnd.oci.image.layer.v1.tar),
// raw or qcow2 types, each possibly gzip or zstd compressed — the agent
// detects the compression and the format from the bytes.
func writable(mt string) bool {
	base := mt
	for _, s := range []string{"+zstd", "+gzip"} {
		base = strings.TrimSuffix(base, s)
	}
	switch base {
	case "application/octet-stream", ocispec.MediaTypeImageLayer,
		"application/zstd", "application/gzip", "application/x-qemu-disk",
		"application/x-qcow2", "application/vnd.qemu.qcow2",
		"application/x-raw-disk-image", "application/vnd.ironflow.disk.raw":
		return true
	}
	return false
}

// registryError words an oras failure as Ironic does.
func (o Options) registryError(r Ref, err error) error {
	var er *errcode.ErrorResponse
	switch {
	case errors.As(err, &er):
		switch er.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return authError(r, err)
		case http.StatusNotFound:
			return notFound(r, err)
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusInternalServerError:
			return &Error{Kind: ErrUnavailable, Msg: "Resource temporarily unavailable, please retry.", Err: scrub(err)}
		}
		return &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Validation of image href %s failed, reason: the registry answered %d", r, er.StatusCode), Err: scrub(err)}
	case errors.Is(err, errdef.ErrNotFound):
		return notFound(r, err)
	case errors.Is(err, errdef.ErrSizeExceedsLimit):
		return refError(r.String(), fmt.Sprintf("the manifest is more than the %d bytes ironflow reads", o.maxMetadata()))
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return authError(r, err)
	case isUntrusted(err):
		return refError(r.String(), "the registry's TLS certificate is not trusted (driver_info/image_verify_ca): "+scrub(err).Error())
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Kind: ErrUnavailable, Msg: "Resource temporarily unavailable, please retry.", Err: scrub(err)}
	}
	return &Error{Kind: ErrUnavailable, Msg: "Resource temporarily unavailable, please retry.", Err: scrub(err)}
}

func authError(r Ref, err error) error {
	return &Error{Kind: ErrAuth, Msg: fmt.Sprintf("The requested image %s requires authentication which has not been provided. Unable to proceed.", r), Err: scrub(err)}
}

func notFound(r Ref, err error) error {
	if r.Digest == "" {
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("Image tag %s could not be found.", r), Err: scrub(err)}
	}
	return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("Image %s could not be found.", r), Err: scrub(err)}
}

// tagNotFound is Ironic's OciImageTagNotFound, with the tags the
// repository has (oci_registry.OciClient._resolve_tag); a repository
// without tags is Ironic's InvalidImageRef "does not have any tags".
func tagNotFound(ctx context.Context, repo *remote.Repository, r Ref, cause error) error {
	var tags []string
	err := repo.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		if len(tags) > 100 {
			tags = append(tags[:100], "...")
			return errStopTags
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopTags) {
		return cause
	}
	if len(tags) == 0 {
		return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("Image %s does not have any tags", r), Err: scrub(err)}
	}
	return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf("Image tag %s could not be found, available tags are %s", r, strings.Join(tags, ", ")), Err: cause}
}

var errStopTags = errors.New("enough tags")

func isUntrusted(err error) bool {
	s := err.Error()
	return strings.Contains(s, "x509:") || strings.Contains(s, "tls: failed to verify")
}

// scrub keeps an error's text (for logs) and drops any structure that
// might carry a request: oras errors hold no credentials, but a URL's
// query may carry a token service's parameters.
func scrub(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(err.Error())
}

// Open streams the layer of img from the registry; the caller verifies
// the bytes against img.Layer (the cache does).
func Open(ctx context.Context, img Image, o Options) (io.ReadCloser, error) {
	repo, err := o.repository(img.Manifest)
	if err != nil {
		return nil, err
	}
	rc, err := repo.Blobs().Fetch(ctx, ocispec.Descriptor{MediaType: img.MediaType, Digest: digest.Digest(img.Layer), Size: img.Size})
	if err != nil {
		return nil, o.registryError(img.Manifest, err)
	}
	return rc, nil
}

// Direct is how an agent fetches a layer from the registry itself
// (image_download_source=direct): the blob's URL and the Authorization
// header to send with it, as Ironic's identify_specific_image returns them
// (image_url, image_request_authorization_secret). Authorization is a
// bearer token the registry's token service issued for pulling this
// repository; it is a secret: never logged, recorded in a workflow history
// or returned by the API.
type Direct struct {
	URL           string
	Authorization string // "Bearer <token>", "" for a registry without auth
}

// String hides the token from any %v.
func (d Direct) String() string {
	if d.Authorization == "" {
		return d.URL
	}
	return d.URL + " (with a bearer token)"
}

// ErrLastingCredential: the registry takes basic credentials, which an
// agent given them would hold for good.
var ErrLastingCredential = errors.New("the registry takes the pull secret itself (basic auth), not short-lived bearer tokens")

// DirectAccess asks the registry for img's layer (a HEAD of the blob)
// the way an agent will fetch it, and returns the URL and the
// Authorization the registry accepted. A registry that accepted the pull
// secret itself (basic auth) is refused: the agent gets short-lived
// tokens only, so that a machine never holds a lasting registry
// credential (docs/oci-images.md, "Direct download").
func DirectAccess(ctx context.Context, img Image, o Options) (Direct, error) {
	r := img.Manifest
	if r.Registry == "" {
		r = img.Ref
	}
	rec := &authRecorder{}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	copied := *hc
	rec.next = base
	copied.Transport = rec
	o.HTTPClient = &copied
	repo, err := o.repository(r)
	if err != nil {
		return Direct{}, err
	}
	if _, err := repo.Blobs().Resolve(ctx, img.Layer); err != nil {
		return Direct{}, o.registryError(r, err)
	}
	scheme := "https"
	if o.PlainHTTP {
		scheme = "http"
	}
	host := repo.Reference.Host() // docker.io is served by registry-1.docker.io
	d := Direct{URL: fmt.Sprintf("%s://%s/v2/%s/blobs/%s", scheme, host, r.Repository, img.Layer)}
	authz := rec.accepted(host)
	switch kind, _, _ := strings.Cut(authz, " "); {
	case authz == "":
	case strings.EqualFold(kind, "Bearer"):
		d.Authorization = authz
	default:
		return Direct{}, &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("Validation of image href %s failed, reason: image_download_source=direct: %v; use image_download_source=http (the image cache fetches it)", img.Ref, ErrLastingCredential), Err: ErrLastingCredential}
	}
	return d, nil
}

// authRecorder keeps the Authorization header of the last request to a
// registry host that the registry answered with success.
type authRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	last map[string]string
}

func (a *authRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err == nil && resp.StatusCode < 300 && strings.HasPrefix(req.URL.Path, "/v2/") {
		a.mu.Lock()
		if a.last == nil {
			a.last = map[string]string{}
		}
		a.last[req.URL.Host] = req.Header.Get("Authorization")
		a.mu.Unlock()
	}
	return resp, err
}

func (a *authRecorder) accepted(host string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[host]
}
