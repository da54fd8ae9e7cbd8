package configdrive

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// TestForInstanceInfoKeepsStringsAndBuildsTheJSONForm: what a deploy
// request's configdrive becomes in instance_info, as Ironic keeps it.
func TestForInstanceInfoKeepsStringsAndBuildsTheJSONForm(t *testing.T) {
	iso := []byte("CD001 an image")
	encoded := base64.StdEncoding.EncodeToString(gz(iso))
	for _, tc := range []struct {
		name, in, want string
	}{
		{"URL kept as given", string(jsonString("http://10.0.0.1/cd.iso?sig=x")), "http://10.0.0.1/cd.iso?sig=x"},
		{"gzip+base64 kept as given", string(jsonString(encoded)), encoded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ForInstanceInfo([]byte(tc.in))
			if err != nil || got != tc.want {
				t.Fatalf("ForInstanceInfo = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	t.Run("JSON form built into a config-2 ISO", func(t *testing.T) {
		got, err := ForInstanceInfo([]byte(` {"meta_data":{"uuid":"u1"},"user_data":"#cloud-config\n"}`))
		if err != nil {
			t.Fatal(err)
		}
		image, err := Decode(got)
		if err != nil {
			t.Fatalf("the stored drive does not decode: %v", err)
		}
		label, files := readISO(t, image)
		if !strings.EqualFold(label, Label) || !strings.Contains(files["openstack/latest/meta_data.json"], `"uuid":"u1"`) ||
			files["openstack/latest/user_data"] != "#cloud-config\n" {
			t.Fatalf("built drive: label %q files %v", label, files)
		}
	})

	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"neither string nor object", `42`, "configdrive must be a string"},
		{"not base64", string(jsonString("not base64!")), "neither a URL nor base64"},
		{"base64 without gzip", string(jsonString(base64.StdEncoding.EncodeToString(iso))), "base64 but not gzip"},
		{"gzip above 64 MiB", string(jsonString(base64.StdEncoding.EncodeToString(gz(make([]byte, MaxSize+1))))), ErrTooLarge.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := ForInstanceInfo([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ForInstanceInfo = %q, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
}

// TestDecodeDownloadedAcceptsEveryFormAnAgentFetches: a config drive URL
// may serve the string form or the image, gzipped or not.
func TestDecodeDownloadedAcceptsEveryFormAnAgentFetches(t *testing.T) {
	iso := append([]byte("CD001 config-2 "), bytes.Repeat([]byte{7, 0xff, 0}, 1000)...)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"raw image", iso},
		{"gzipped image", gz(iso)},
		{"gzip+base64", []byte(base64.StdEncoding.EncodeToString(gz(iso)) + "\n")},
		{"base64 without gzip", []byte(base64.StdEncoding.EncodeToString(iso))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeDownloaded(tc.body)
			if err != nil || !bytes.Equal(got, iso) {
				t.Fatalf("DecodeDownloaded: %d bytes, %v; want the image", len(got), err)
			}
		})
	}
	if _, err := DecodeDownloaded(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty body: %v, want ErrEmpty", err)
	}
	if _, err := Decode(""); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty string: %v, want ErrEmpty", err)
	}
}
