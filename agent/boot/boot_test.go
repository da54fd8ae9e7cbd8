//go:build linux

package boot

import (
	"reflect"
	"testing"
)

func TestParseCmdline(t *testing.T) {
	got := ParseCmdline(`BOOT_IMAGE=/vmlinuz console=ttyS0 quiet ipa-api-url=http://10.0.0.1:6385 ipa-insecure=1 note="a b c" BOOTIF=01-52-54-00-aa-bb-01` + "\n")
	want := map[string]string{"BOOT_IMAGE": "/vmlinuz", "console": "ttyS0", "quiet": "", "ipa-api-url": "http://10.0.0.1:6385",
		"ipa-insecure": "1", "note": "a b c", "BOOTIF": "01-52-54-00-aa-bb-01"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestFamiliesFor(t *testing.T) {
	for url, want := range map[string]Families{
		"http://10.0.0.1:6385":          {V4: true},
		"https://[fd00:77::1]:6385":     {V6: true},
		"http://ironflow.example:6385":  {V4: true, V6: true},
		"http://[::ffff:10.0.0.1]:6385": {V4: true},
		"::not a url":                   {V4: true, V6: true},
	} {
		if got := FamiliesFor(url); got != want {
			t.Errorf("FamiliesFor(%q) = %+v, want %+v", url, got, want)
		}
	}
}
