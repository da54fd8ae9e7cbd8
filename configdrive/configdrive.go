// Package configdrive builds OpenStack config drives: ISO9660 images
// labelled config-2 that cloud-init and Glean read at first boot (hostname,
// SSH keys, network, user data), and the gzip+base64 string form Ironic's
// API carries them in.
//
// It owns the image format only; what goes into meta_data (node UUID, name,
// keys) is the caller's business. It never logs: user data may hold secrets.
package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// ErrTooLarge is returned for a drive above MaxSize.
var ErrTooLarge = errors.New("config drive larger than 64 MiB")

// Decode reverses Encode. An image that was base64-encoded without gzip is
// accepted too, as the agent does.
func Decode(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("decode config drive: base64: %w", err)
	}
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		if len(raw) > MaxSize {
			return nil, fmt.Errorf("decode config drive: %w", ErrTooLarge)
		}
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode config drive: gzip: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("decode config drive: gzip: %w", err)
	}
	if len(out) > MaxSize {
		return nil, fmt.Errorf("decode config drive: %w", ErrTooLarge)
	}
	return out, nil
}
