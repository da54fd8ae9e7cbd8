// Package glance resolves a node's instance_info/image_source naming a
// Glance image (a bare UUID, or glance://UUID) through the Image service v2
// API: what the image is (disk and container format, checksum, size,
// kernel/ramdisk, image type), whether it may be deployed (status active),
// and its data (GET /v2/images/{id}/file).
package glance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// Auth methods of Config.Auth. Keystone comes later.
const (
	AuthNone      = "none"
	AuthHTTPBasic = "http_basic"
)

// Config is how ironflow reaches Glance. It is process configuration,
// never part of a workflow's input: the password stays out of histories.
type Config struct {
	URL      string // e.g. http://glance.example:9292 (the v2 API below it)
	Auth     string // none (default) or http_basic
	User     string
	Password string
	// HTTPClient, if set, carries requests (tests count them); its
	// Transport gets the basic auth wrapper.
	HTTPClient *http.Client
}

// ErrNotFound: Glance has no such image.
var ErrNotFound = errors.New("image not found")

// ErrUnavailable: Glance did not answer as it should (network, 5xx): a
// retry may succeed.
var ErrUnavailable = errors.New("glance unavailable")

// ErrUnacceptable: the image exists but cannot be deployed.
var ErrUnacceptable = errors.New("image is unacceptable")

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// ImageID returns the Glance image ID an image_source names: a bare UUID (as
// Nova passes it) or glance://UUID, as Ironic's image service accepts them.
func ImageID(imageSource string) (string, bool) {
	s := strings.TrimSpace(imageSource)
	if rest, ok := strings.CutPrefix(s, "glance://"); ok {
		s = rest
	}
	if uuidRE.MatchString(s) {
		return s, true
	}
	return "", false
}

// Image is what a deploy needs of a Glance image.
type Image struct {
	ID              string
	Name            string
	Status          string
	DiskFormat      string
	ContainerFormat string
	Size            int64
	Checksum        string // md5, legacy
	HashAlgo        string // os_hash_algo, e.g. sha512
	HashValue       string // os_hash_value
	KernelID        string // kernel_id property (partition images)
	RamdiskID       string // ramdisk_id property
	ImageType       string // img_type property: whole-disk or partition
}

// Client talks to one Glance.
type Client struct {
	sc *gophercloud.ServiceClient
}

// New builds a client; it does not contact Glance.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("glance: no URL configured (--glance-url)")
	}
	hc := http.Client{}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	switch cfg.Auth {
	case "", AuthNone:
	case AuthHTTPBasic:
		if cfg.User == "" {
			return nil, errors.New("glance: http_basic auth needs a user")
		}
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		hc.Transport = basicAuth{next: next, user: cfg.User, password: cfg.Password}
	default:
		return nil, fmt.Errorf("glance: unknown auth %q (none or http_basic)", cfg.Auth)
	}
	endpoint := gophercloud.NormalizeURL(cfg.URL)
	endpoint = strings.TrimSuffix(endpoint, "v2/")
	pc := &gophercloud.ProviderClient{HTTPClient: hc}
	sc := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: endpoint, ResourceBase: endpoint + "v2/", Type: "image"}
	return &Client{sc: sc}, nil
}

type basicAuth struct {
	next           http.RoundTripper
	user, password string
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(r)
}

// Get reads an image's record. A missing image is ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Image, error) {
	img, err := images.Get(ctx, c.sc, id).Extract()
	if err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil, fmt.Errorf("Image %s could not be found: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("glance: get image %s: %w: %w", id, ErrUnavailable, err)
	}
	prop := func(k string) string {
		v, _ := img.Properties[k].(string)
		return v
	}
	return &Image{
		ID: img.ID, Name: img.Name, Status: string(img.Status),
		DiskFormat: img.DiskFormat, ContainerFormat: img.ContainerFormat,
		Size: img.SizeBytes, Checksum: img.Checksum,
		HashAlgo: prop("os_hash_algo"), HashValue: prop("os_hash_value"),
		KernelID: prop("kernel_id"), RamdiskID: prop("ramdisk_id"), ImageType: prop("img_type"),
	}, nil
}

// Deployable refuses what Ironic refuses before a deploy: an image that is
// not active (queued, saving, deactivated, killed, deleted, ...) has no data
// to write or serve, and one without a checksum cannot be verified.
func (img *Image) Deployable() error {
	if img.Status != string(images.ImageStatusActive) {
		return fmt.Errorf("Image %s is unacceptable: The image is required to be in an active state (it is %s): %w", img.ID, img.Status, ErrUnacceptable)
	}
	if img.HashValue == "" && img.Checksum == "" {
		return fmt.Errorf("Image %s is unacceptable: it has neither os_hash_value nor checksum: %w", img.ID, ErrUnacceptable)
	}
	return nil
}

// DiskFormats are the Glance disk_format values of an image the agent
// writes to a disk (raw data, possibly gzip- or zstd-compressed, and qcow2).
var DiskFormats = []string{"raw", "qcow2"}

// Writable refuses an image to be written to the disk whose formats the
// agent cannot write: it writes the image's data as it is (container_format
// bare: no OVA, OVF or docker wrapper around it) in one of DiskFormats.
// A partition image's kernel and ramdisk (aki, ari) are served, not
// written, and need not be Writable.
func (img *Image) Writable() error {
	if img.ContainerFormat != "bare" {
		return fmt.Errorf("Image %s is unacceptable: its container_format is %s: ironflow writes an image's data as it is, which needs container_format bare: %w", img.ID, orNone(img.ContainerFormat), ErrUnacceptable)
	}
	if !slices.Contains(DiskFormats, img.DiskFormat) {
		return fmt.Errorf("Image %s is unacceptable: its disk_format is %s: ironflow's agent writes %s images: %w", img.ID, orNone(img.DiskFormat), strings.Join(DiskFormats, " and "), ErrUnacceptable)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "not set"
	}
	return s
}

// Partition reports whether the image is a partition image, as Ironic's
// images.is_whole_disk_image decides for a Glance image: its img_type
// property if it has one, else whether it names a kernel or a ramdisk.
func (img *Image) Partition() bool {
	if img.ImageType != "" {
		return img.ImageType == "partition"
	}
	return img.KernelID != "" || img.RamdiskID != ""
}

// Resolve gets the image a deploy writes and checks it can be deployed
// and written.
func (c *Client) Resolve(ctx context.Context, id string) (*Image, error) {
	img, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := img.Deployable(); err != nil {
		return nil, err
	}
	if err := img.Writable(); err != nil {
		return nil, err
	}
	return img, nil
}

// ResolveFile gets an image the deploy fetches besides the one it writes
// (a partition image's kernel_id or ramdisk_id) and checks it can be
// served: whatever its formats (aki, ari), it must be Deployable.
func (c *Client) ResolveFile(ctx context.Context, id string) (*Image, error) {
	img, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := img.Deployable(); err != nil {
		return nil, err
	}
	return img, nil
}

// Download opens the image's data.
func (c *Client) Download(ctx context.Context, id string) (io.ReadCloser, error) {
	res := imagedata.Download(ctx, c.sc, id)
	if res.Err != nil {
		if gophercloud.ResponseCodeIs(res.Err, http.StatusNotFound) {
			return nil, fmt.Errorf("Image %s could not be found: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("glance: download image %s: %w: %w", id, ErrUnavailable, res.Err)
	}
	return res.Body, nil
}

// FileURL is the image's data URL, for agents that fetch it themselves
// (image_download_source=direct); it never carries credentials.
func (c *Client) FileURL(id string) string {
	return c.sc.ResourceBase + "images/" + id + "/file"
}

// ChecksumOf returns the algorithm and value an image's data must hash to:
// os_hash_* when Glance computed them (multihash), else the legacy md5.
func (img *Image) ChecksumOf() (algo, value string) {
	if img.HashValue != "" {
		return strings.ToLower(img.HashAlgo), strings.ToLower(img.HashValue)
	}
	return "md5", strings.ToLower(img.Checksum)
}
