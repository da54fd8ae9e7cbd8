package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// testdata/ironic-podman-machine-os-index.json is the image index of
// podman's machine-os image as quay.io serves it, captured in Ironic's unit
// tests (ironic/tests/unit/common/test_image_service.py,
// OciImageServiceTestCase.setUp, artifact_index; Apache-2.0). The digests
// expected below are the ones Ironic's tests expect identify_specific_image
// to pick (test_identify_specific_image_local, test_identify_specific_image,
// test_identify_specific_image_aarch64).
func TestFilterManifestsIronicFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/ironic-podman-machine-os-index.json")
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source, arch, want, disk string
	}{
		{"local", "", "sha256:dfcb3b199378320640d78121909409599b58b8012ed93320dae48deacde44d45", "qcow2"},
		{"", "amd64", "sha256:9d046091b3dbeda26e1f4364a116ca8d94284000f103da7310e3a4703df1d3e4", "raw"},
		{"http", "x86_64", "sha256:9d046091b3dbeda26e1f4364a116ca8d94284000f103da7310e3a4703df1d3e4", "raw"},
		{"", "aarch64", "sha256:f2981621c1bf821ce44c1cb31c507abe6293d8eea646b029c6b9dc773fa7821a", "raw"},
		{"local", "arm64", "sha256:1010f100f03dba1e5e2bad9905fd9f96ba8554158beb7e6f030718001fa335d8", "qcow2"},
	} {
		got := filterManifests(idx.Manifests, c.source, c.arch)
		if len(got) == 0 || got[0].desc.Digest.String() != c.want || got[0].diskType != c.disk {
			t.Errorf("source %q arch %q: first is %+v, want %s (%s)", c.source, c.arch, got, c.want, c.disk)
		}
		for _, e := range got {
			if e.desc.Annotations["disktype"] == "hyperv" {
				t.Errorf("source %q arch %q: hyperv (an unknown disktype) kept", c.source, c.arch)
			}
		}
		// The entries without a disktype (container images) come last.
		if last := got[len(got)-1]; last.desc.Annotations["disktype"] != "" {
			t.Errorf("source %q arch %q: last is %v, want an entry without disktype", c.source, c.arch, last.desc.Annotations)
		}
	}
	if got := filterManifests(idx.Manifests, "", "ppc64le"); len(got) != 0 {
		t.Errorf("ppc64le: %d entries, want none", len(got))
	}
}

func TestParse(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	for _, c := range []struct{ in, want, err string }{
		{"oci://quay.io/podman/machine-os:5.3", "oci://quay.io/podman/machine-os:5.3", ""},
		{"oci://127.0.0.1:5000/a/b", "oci://127.0.0.1:5000/a/b:latest", ""},
		{"oci://h/a@sha256:" + hex64, "oci://h/a@sha256:" + hex64, ""},
		{"oci://h/a@sha256:abc", "", "Manifest digest length incorrect"},
		{"oci://h/a@md5:abc", "", "was not specific"},
		{"oci://h/a@sha256", "", "Lacking required digest value"},
		{"oci://h", "", "needs a registry host and a repository path"},
		{"oci://h/A:1", "", "lower case"},
		{"oci://user:hunter2@h/a:1", "", "an oci:// URL carries no credentials"},
	} {
		r, err := Parse(c.in)
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Parse(%q): the error shows the password: %v", c.in, err)
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, %v; want error %q", c.in, r, err, c.err)
			}
			continue
		}
		if err != nil || r.String() != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", c.in, r, err, c.want)
		}
	}
}

func TestPullSecret(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Credential
	}{
		{"user:pa:ss", Credential{"user", "pa:ss"}},
		{"dXNlcjpwYXNz", Credential{"user", "pass"}}, // config.json's auth: base64("user:pass")
		{"opaque-token", Credential{"", "opaque-token"}},
		{"  ", Credential{}},
	} {
		if got := PullSecret(c.in); got != c.want {
			t.Errorf("PullSecret(%q) = %#v, want %#v", c.in, got, c.want)
		}
	}
	if s := fmt.Sprint(Credential{"user", "pass"}); s != "(credential)" {
		t.Errorf("String() shows the secret: %s", s)
	}
}
