package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestDHCPListenFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		listen  netip.AddrPort
		wantErr string
	}{
		{"interface only keeps port 67 on it", []string{"--dhcp-interface", "eth1", "--dhcp-server-address", "10.0.0.1"}, netip.AddrPort{}, ""},
		{"listen address", []string{"--dhcp-listen", "127.0.0.1:6767", "--dhcp-server-address", "10.0.0.1"}, netip.MustParseAddrPort("127.0.0.1:6767"), ""},
		{"listen without a port", []string{"--dhcp-listen", "127.0.0.1", "--dhcp-server-address", "10.0.0.1"}, netip.AddrPort{}, `--dhcp-listen "127.0.0.1": want ip:port`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSettings("pxe")
			f := addBootFlags(s)
			if err := s.parse(c.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.dhcpConfig("http://10.0.0.1:8080")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || cfg.Listen != c.listen {
				t.Fatalf("Listen %v, %v; want %v", cfg.Listen, err, c.listen)
			}
		})
	}
}
