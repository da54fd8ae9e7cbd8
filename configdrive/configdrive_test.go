package configdrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// readISO opens image with go-diskfs and returns its label and files.
func readISO(t *testing.T, image []byte) (string, map[string]string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(p, image, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs, err := iso9660.Read(file.New(f, true), int64(len(image)), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := fs.ReadDir(dir)
		if err != nil {
			t.Fatalf("read dir %s: %v", dir, err)
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				walk(p)
				continue
			}
			b, err := fs.ReadFile(p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			files[p] = string(b)
		}
	}
	walk(".")
	// go-diskfs pads the volume identifier with NULs; blkid, which
	// cloud-init asks for LABEL=config-2, stops at the first one.
	return strings.TrimRight(fs.Label(), "\x00 "), files
}

func TestBuildWritesConfig2(t *testing.T) {
	d := Data{
		MetaData:    map[string]any{"uuid": "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", "hostname": "node-1", "public_keys": map[string]any{"default": "ssh-ed25519 AAAA test"}},
		UserData:    []byte("#cloud-config\nruncmd: [echo hi]\n"),
		NetworkData: map[string]any{"links": []any{map[string]any{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:aa:bb:01"}}},
		VendorData:  map[string]any{"ironflow": map[string]any{"deploy": "1"}},
	}
	var b bytes.Buffer
	if err := Build(&b, d); err != nil {
		t.Fatal(err)
	}
	label, files := readISO(t, b.Bytes())
	if !strings.EqualFold(label, Label) {
		t.Errorf("label %q, want %q", label, Label)
	}
	wantJSON := map[string]any{
		"openstack/latest/meta_data.json":     d.MetaData,
		"openstack/2012-08-10/meta_data.json": d.MetaData,
		"openstack/latest/network_data.json":  d.NetworkData,
		"openstack/latest/vendor_data.json":   d.VendorData,
	}
	for name, want := range wantJSON {
		got, ok := files[name]
		if !ok {
			t.Errorf("%s missing; files: %v", name, keys(files))
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(got), &v); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		wantRound, _ := json.Marshal(want)
		var w map[string]any
		json.Unmarshal(wantRound, &w)
		if !reflect.DeepEqual(v, w) {
			t.Errorf("%s = %v, want %v", name, v, w)
		}
	}
	for _, name := range []string{"openstack/latest/user_data", "openstack/2012-08-10/user_data"} {
		if files[name] != string(d.UserData) {
			t.Errorf("%s = %q, want %q", name, files[name], d.UserData)
		}
	}
}

func TestBuildWithoutOptionalParts(t *testing.T) {
	var b bytes.Buffer
	if err := Build(&b, Data{MetaData: map[string]any{"uuid": "x"}}); err != nil {
		t.Fatal(err)
	}
	_, files := readISO(t, b.Bytes())
	for name := range files {
		if strings.HasSuffix(name, "user_data") || strings.HasSuffix(name, "network_data.json") || strings.HasSuffix(name, "vendor_data.json") {
			t.Errorf("unexpected %s", name)
		}
	}
	if _, ok := files["openstack/latest/meta_data.json"]; !ok {
		t.Errorf("meta_data.json missing: %v", keys(files))
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := Build(&b, Data{MetaData: map[string]any{"uuid": "x"}}); err != nil {
		t.Fatal(err)
	}
	s, err := Encode(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatal("decoded image differs")
	}
	label, _ := readISO(t, got)
	if !strings.EqualFold(label, Label) {
		t.Errorf("label %q", label)
	}
}

func TestDecodeRejects(t *testing.T) {
	if _, err := Decode("not base64!"); err == nil {
		t.Error("bad base64 accepted")
	}
	big, _ := Encode(make([]byte, MaxSize+1))
	if _, err := Decode(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized drive: %v, want ErrTooLarge", err)
	}
}

func TestFromJSONForm(t *testing.T) {
	cases := []struct {
		name, in string
		wantUD   string
	}{
		{"string user data", `{"meta_data":{"uuid":"u"},"user_data":"#!/bin/sh\necho hi"}`, "#!/bin/sh\necho hi"},
		{"dict user data becomes JSON", `{"meta_data":{"uuid":"u"},"user_data":{"a":1}}`, `{"a":1}`},
		{"no user data", `{"meta_data":{"uuid":"u"},"network_data":{"links":[]}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromJSONForm([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(d.UserData) != tc.wantUD {
				t.Errorf("user data %q, want %q", d.UserData, tc.wantUD)
			}
			if d.MetaData["uuid"] != "u" {
				t.Errorf("meta_data %v", d.MetaData)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestIPv6NetworkDataReachesTheDrive: Ironic's JSON form with an IPv6-only
// network_data (Nova's schema: a "ipv6" network with its address, netmask
// and default route, DNS over IPv6) lands in openstack/latest/network_data.json
// with every IPv6 field as given, for cloud-init or Glean to configure.
func TestIPv6NetworkDataReachesTheDrive(t *testing.T) {
	nd := `{"links":[{"id":"port-0","type":"phy","ethernet_mac_address":"52:54:00:99:00:06","mtu":1500}],` +
		`"networks":[{"id":"network0","type":"ipv6","link":"port-0","ip_address":"fd99::100","netmask":"ffff:ffff:ffff:ffff::",` +
		`"routes":[{"network":"::","netmask":"::","gateway":"fd99::1"}],"services":[{"type":"dns","address":"fd99::53"}]}],` +
		`"services":[{"type":"dns","address":"fd99::53"}]}`
	d, err := FromJSONForm([]byte(`{"meta_data":{"uuid":"u"},"network_data":` + nd + `}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Build(&buf, d); err != nil {
		t.Fatal(err)
	}
	_, files := readISO(t, buf.Bytes())
	got, ok := files["openstack/latest/network_data.json"]
	if !ok {
		t.Fatalf("no network_data.json; files %v", keys(files))
	}
	var want, have any
	if err := json.Unmarshal([]byte(nd), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &have); err != nil {
		t.Fatalf("network_data.json is not JSON: %v\n%s", err, got)
	}
	if !reflect.DeepEqual(want, have) {
		t.Errorf("network_data.json\n%s\nwant\n%s", got, nd)
	}
}
