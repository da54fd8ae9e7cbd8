// Package lldpswitch is a test lab's top-of-rack switch as far as LLDP
// goes: Debian's lldpd on one end of a veth pair whose other end is a
// port of the lab's bridge, announcing a system name and an interface-name
// port ID every second. A Linux bridge keeps link-local frames such as
// LLDP's (01:80:c2:00:00:0e) to itself unless its group_fwd_mask has bit
// 14; IPCommands sets it, so that the lab's machines hear the switch.
package lldpswitch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// IPCommands are the `ip` commands (to run inside the lab's namespace)
// that add the switch's port: port is lldpd's end, port+"-br" the
// bridge's.
func IPCommands(bridge, port string) [][]string {
	return [][]string{
		{"link", "add", port, "type", "veth", "peer", "name", port + "-br"},
		{"link", "set", port + "-br", "master", bridge},
		{"link", "set", bridge, "type", "bridge", "group_fwd_mask", "0x4000"},
		{"link", "set", port + "-br", "up"},
		{"link", "set", port, "up"},
	}
}

// Command is lldpd's command line (to run inside the lab's namespace) for
// a switch named name on port. Its configuration and control socket live
// in a directory that every user reaches (lldpd's own lldpcli applies the
// configuration as an unprivileged user), removed when the test ends.
func Command(t testing.TB, name, port string) []string {
	t.Helper()
	if _, err := exec.LookPath("lldpd"); err != nil {
		t.Fatal("lldpd is missing: make test installs it (scripts/install-deps.sh)")
	}
	dir, err := os.MkdirTemp("", "ironflow-lldpd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "lldpd.conf")
	body := "configure system hostname " + name + "\nconfigure lldp portidsubtype ifname\nconfigure lldp tx-interval 1\n"
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"lldpd", "-d", "-u", filepath.Join(dir, "lldpd.socket"), "-O", conf, "-I", port}
}
