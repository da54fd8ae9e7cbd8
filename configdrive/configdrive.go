// Package configdrive builds OpenStack config drives: ISO9660 images
// labelled config-2 that cloud-init and Glean read at first boot (hostname,
// SSH keys, network, user data). It also owns the forms Ironic's API and
// agent carry them in: the gzip+base64 string, a URL to fetch it from, and
// the JSON form (API 1.56) built into an ISO. The API's deploy request, the
// worker and the agent all encode and decode through it.
//
// It owns the formats only; what goes into meta_data (node UUID, name,
// keys) is the caller's business, and fetching a URL is the agent's. It
// never logs: user data may hold secrets. It is pure Go, so the static
// agent can import it.
package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Label is the volume label cloud-init looks for.
const Label = "config-2"

// MaxSize bounds a decoded config drive; Ironic writes it to a partition of
// at most 64 MiB.
const MaxSize = 64 << 20

// Versions the drive carries: cloud-init reads "latest" first and falls
// back to the oldest OpenStack metadata version.
var Versions = []string{"latest", "2012-08-10"}

// Data is a config drive's content, as in Ironic's JSON form (API 1.56):
// {"meta_data": {...}, "user_data": ..., "network_data": {...},
// "vendor_data": {...}}.
type Data struct {
	MetaData    map[string]any
	UserData    []byte // written as is; empty omits user_data
	NetworkData map[string]any
	VendorData  map[string]any
}

// FromJSONForm reads Ironic's JSON-dict config drive. user_data may be a
// string (used as is) or any other JSON value (written as JSON), as the
// Ironic conductor does.
func FromJSONForm(raw []byte) (Data, error) {
	var form struct {
		MetaData    map[string]any  `json:"meta_data"`
		UserData    json.RawMessage `json:"user_data"`
		NetworkData map[string]any  `json:"network_data"`
		VendorData  map[string]any  `json:"vendor_data"`
	}
	if err := json.Unmarshal(raw, &form); err != nil {
		return Data{}, fmt.Errorf("read config drive JSON: %w", err)
	}
	d := Data{MetaData: form.MetaData, NetworkData: form.NetworkData, VendorData: form.VendorData}
	if ud := bytes.TrimSpace(form.UserData); len(ud) > 0 && string(ud) != "null" {
		var s string
		if err := json.Unmarshal(ud, &s); err == nil {
			d.UserData = []byte(s)
		} else {
			d.UserData = ud
		}
	}
	return d, nil
}

// files lists the drive's files by path.
func (d Data) files() (map[string][]byte, error) {
	meta := d.MetaData
	if meta == nil {
		meta = map[string]any{}
	}
	out := map[string][]byte{}
	for _, v := range Versions {
		dir := "openstack/" + v + "/"
		b, err := json.Marshal(meta)
		if err != nil {
			return nil, fmt.Errorf("encode meta_data: %w", err)
		}
		out[dir+"meta_data.json"] = b
		if len(d.UserData) > 0 {
			out[dir+"user_data"] = d.UserData
		}
		if v != "latest" {
			continue // network and vendor data came after 2012-08-10
		}
		if d.NetworkData != nil {
			if out[dir+"network_data.json"], err = json.Marshal(d.NetworkData); err != nil {
				return nil, fmt.Errorf("encode network_data: %w", err)
			}
		}
		if d.VendorData != nil {
			if out[dir+"vendor_data.json"], err = json.Marshal(d.VendorData); err != nil {
				return nil, fmt.Errorf("encode vendor_data: %w", err)
			}
		}
	}
	return out, nil
}

// BuildFile writes the config drive ISO to path.
func BuildFile(path string, d Data) error {
	files, err := d.files()
	if err != nil {
		return fmt.Errorf("build config drive: %w", err)
	}
	work, err := os.MkdirTemp("", "configdrive-")
	if err != nil {
		return fmt.Errorf("build config drive: %w", err)
	}
	defer os.RemoveAll(work)
	for name, content := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("build config drive: %w", err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return fmt.Errorf("build config drive: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("build config drive: %w", err)
	}
	defer f.Close()
	fs, err := iso9660.Create(file.New(f, false), 0, 0, 2048, work)
	if err != nil {
		return fmt.Errorf("build config drive: create ISO9660: %w", err)
	}
	// Rock Ridge and Joliet keep the lower-case long names cloud-init opens,
	// as genisoimage -r -J does for Nova and Ironic.
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: Label}); err != nil {
		return fmt.Errorf("build config drive: write ISO9660: %w", err)
	}
	return f.Close()
}

// Build writes the config drive ISO to w.
func Build(w io.Writer, d Data) error {
	dir, err := os.MkdirTemp("", "configdrive-out-")
	if err != nil {
		return fmt.Errorf("build config drive: %w", err)
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "config-2.iso")
	if err := BuildFile(p, d); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("build config drive: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("build config drive: copy image: %w", err)
	}
	return nil
}

// Encode returns image gzipped and base64-encoded, the form Ironic stores
// in instance_info and hands to the agent.
func Encode(image []byte) (string, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(image); err != nil {
		return "", fmt.Errorf("encode config drive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("encode config drive: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

// Errors callers match with errors.Is.
var (
	// ErrTooLarge is returned for a drive above MaxSize.
	ErrTooLarge = errors.New("config drive larger than 64 MiB")
	// ErrEmpty is returned for a drive that decodes to nothing.
	ErrEmpty = errors.New("config drive is empty")
)

// IsURL reports whether a config drive value is a URL to fetch it from
// rather than the drive itself.
func IsURL(v string) bool {
	return strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://")
}

// ForInstanceInfo validates the configdrive of a deploy request (its JSON
// value) and returns what the node keeps in instance_info.configdrive, as
// Ironic does: a URL or a gzip+base64 ISO as given, or for Ironic's JSON
// form (API 1.56) the config-2 ISO built from it, encoded.
func ForInstanceInfo(raw []byte) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		d, err := FromJSONForm(raw)
		if err != nil {
			return "", err
		}
		var iso bytes.Buffer
		if err := Build(&iso, d); err != nil {
			return "", err
		}
		if iso.Len() > MaxSize {
			return "", ErrTooLarge
		}
		return Encode(iso.Bytes())
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("configdrive must be a string (gzip+base64 ISO or URL) or a JSON object with meta_data, user_data, network_data, vendor_data")
	}
	if IsURL(s) {
		if _, err := url.Parse(s); err != nil {
			return "", fmt.Errorf("configdrive URL: %w", err)
		}
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("configdrive is neither a URL nor base64: %w", err)
	}
	if !isGzip(b) {
		return "", errors.New("configdrive is base64 but not gzip")
	}
	if _, err := gunzip(io.Discard, b); err != nil {
		return "", err
	}
	return s, nil
}

// Decode reverses Encode: it returns the ISO of a config drive given
// inline. An image that was base64-encoded without gzip is accepted too, as
// the agent does.
func Decode(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("decode config drive: base64: %w", err)
	}
	return image(raw)
}

// DecodeDownloaded returns the ISO of a config drive fetched from its URL:
// the body may be the drive's string form (base64, gzipped or not) or the
// image itself (gzipped or not), as IPA accepts.
func DecodeDownloaded(body []byte) ([]byte, error) {
	data := body
	if dec, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(bytes.TrimSpace(body)))); err == nil && len(dec) > 0 {
		data = dec
	}
	return image(data)
}

// image is the ISO in b, gunzipped if need be, within MaxSize.
func image(b []byte) ([]byte, error) {
	if isGzip(b) {
		var out bytes.Buffer
		if _, err := gunzip(&out, b); err != nil {
			return nil, err
		}
		b = out.Bytes()
	} else if len(b) > MaxSize {
		return nil, fmt.Errorf("decode config drive: %w", ErrTooLarge)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("decode config drive: %w", ErrEmpty)
	}
	return b, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// gunzip writes the gzip stream b to w, refusing more than MaxSize.
func gunzip(w io.Writer, b []byte) (int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("decode config drive: gzip: %w", err)
	}
	defer zr.Close()
	n, err := io.Copy(w, io.LimitReader(zr, MaxSize+1))
	if err != nil {
		return n, fmt.Errorf("decode config drive: gzip: %w", err)
	}
	if n > MaxSize {
		return n, fmt.Errorf("decode config drive: %w", ErrTooLarge)
	}
	return n, nil
}
