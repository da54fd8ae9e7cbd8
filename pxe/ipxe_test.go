package pxe

import (
	"strings"
	"testing"
)

func TestRenderIPXEScript(t *testing.T) {
	bc := BootConfig{NodeUUID: testNode, BootMode: BootModeUEFI, Kind: "agent",
		KernelURL: "http://10.99.0.1:8080/images/vmlinuz", InitrdURL: "http://10.99.0.1:8080/images/initrd",
		KernelParams: "console=ttyS0  ipa-api-url=http://10.99.0.1:6385"}
	s, err := RenderIPXEScript(bc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#!ipxe\n",
		"kernel --name kernel http://10.99.0.1:8080/images/vmlinuz initrd=initrd console=ttyS0 ipa-api-url=http://10.99.0.1:6385 BOOTIF=${mac} || goto retry\n",
		"initrd --name initrd http://10.99.0.1:8080/images/initrd || goto retry\n",
		"boot || goto retry\n",
		"goto boot\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []BootConfig{
		{NodeUUID: "not-a-uuid", KernelURL: bc.KernelURL, InitrdURL: bc.InitrdURL},
		{NodeUUID: testNode, KernelURL: "http://x/k\nshell", InitrdURL: bc.InitrdURL},
		{NodeUUID: testNode, KernelURL: bc.KernelURL, InitrdURL: "file:///etc/passwd"},
		{NodeUUID: testNode, KernelURL: bc.KernelURL, InitrdURL: bc.InitrdURL, KernelParams: "a || shell"},
		{NodeUUID: testNode, KernelURL: bc.KernelURL, InitrdURL: bc.InitrdURL, KernelParams: "a\rshell"},
	} {
		if _, err := RenderIPXEScript(bad); err == nil {
			t.Errorf("rendered unsafe boot config %+v", bad)
		}
	}
}

// scriptShape is the line structure every rendered script has; a value that
// added or changed a line would break it.
var scriptShape = []string{"#!ipxe", "# ironflow: ", ":boot", "imgfree", "kernel --name kernel ", "initrd --name initrd ", "boot || goto retry", ":retry", "echo ironflow: ", "sleep ", "goto boot"}

func FuzzRenderIPXEScript(f *testing.F) {
	f.Add(testNode, "http://10.99.0.1/k", "http://10.99.0.1/i", "console=ttyS0", "agent")
	f.Add(testNode, "http://a/k\n:boot", "http://a/i", "x || y", "a\nb")
	f.Add(testNode, "http://a/k", "http://a/i", "x||y", "agent")
	f.Fuzz(func(t *testing.T, node, kernel, initrd, params, kind string) {
		s, err := RenderIPXEScript(BootConfig{NodeUUID: node, KernelURL: kernel, InitrdURL: initrd, KernelParams: params, Kind: kind})
		if err != nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		if len(lines) != len(scriptShape) {
			t.Fatalf("script has %d lines, want %d:\n%s", len(lines), len(scriptShape), s)
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, scriptShape[i]) {
				t.Fatalf("line %d %q does not start with %q", i, l, scriptShape[i])
			}
			if i >= 4 && i <= 6 && !strings.HasSuffix(l, " || goto retry") {
				t.Fatalf("line %d %q lost its retry", i, l)
			}
			if strings.Count(l, "||") > 1 || strings.Contains(l, "&&") {
				t.Fatalf("line %d %q chains commands", i, l)
			}
		}
	})
}

// An anaconda or ramdisk boot config boots its own kernel with its own
// parameters (inst.ks pointing at the kickstart route, inst.stage2) the way
// the agent's does.
func TestRenderIPXEScriptInstallerKinds(t *testing.T) {
	for _, kind := range []string{"anaconda", "ramdisk"} {
		bc := BootConfig{NodeUUID: testNode, BootMode: BootModeBIOS, Kind: kind,
			KernelURL: "http://10.99.0.1:8080/images/fedora/vmlinuz", InitrdURL: "http://10.99.0.1:8080/images/fedora/initrd.img",
			KernelParams: "inst.ks=http://10.99.0.1:8080/boot/" + testNode + "/ks.cfg inst.stage2=http://10.99.0.1:8080/images/fedora/ ip=dhcp inst.text console=ttyS0"}
		s, err := RenderIPXEScript(bc)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		want := "kernel --name kernel http://10.99.0.1:8080/images/fedora/vmlinuz initrd=initrd inst.ks=http://10.99.0.1:8080/boot/" + testNode +
			"/ks.cfg inst.stage2=http://10.99.0.1:8080/images/fedora/ ip=dhcp inst.text console=ttyS0 BOOTIF=${mac} || goto retry\n"
		if !strings.Contains(s, want) || !strings.Contains(s, "# ironflow: node "+testNode+", bios boot ("+kind+")") {
			t.Errorf("%s script:\n%s\nwant line %q", kind, s, want)
		}
	}
}
