package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestIPv6BootURL(t *testing.T) {
	addr := netip.MustParseAddr("fd00:77::1")
	for _, tc := range []struct{ set, public, want string }{
		{"", "http://10.77.0.1:8080", "http://[fd00:77::1]:8080"},
		{"", "https://boot.example", "https://[fd00:77::1]:443"},
		{"", "http://[fd00:77::5]:8080/", "http://[fd00:77::5]:8080"},
		{"http://[fd00:77::9]:80/", "http://10.77.0.1:8080", "http://[fd00:77::9]:80"},
	} {
		got, err := ipv6BootURL(tc.set, tc.public, addr)
		if err != nil || got != tc.want {
			t.Errorf("ipv6BootURL(%q, %q) = %q, %v; want %q", tc.set, tc.public, got, err, tc.want)
		}
	}
}

func TestDHCPv6FlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dhcpv6-interface", "br0", "--dhcpv6-server-address", "10.0.0.1", "--dhcpv6-pool", "fd00::/64,fd00::10,fd00::20"}, "--dhcpv6-server-address"},
		{[]string{"--dhcpv6-interface", "br0", "--dhcpv6-server-address", "fd00::1", "--dhcpv6-pool", "fd00::/64,fd00::10"}, "--dhcpv6-pool"},
		{[]string{"--dhcpv6-listen", "[::1]:547", "--dhcpv6-server-address", "fd00::1", "--dhcpv6-pool", "fd00::/64,fd00::10,fd00::20", "--router-advertisements"}, "--router-advertisements needs --dhcpv6-interface"},
	} {
		s := newSettings("pxe")
		f := addDHCPv6Flags(s)
		if err := s.parse(tc.args); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.config("http://10.0.0.1:8080")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.want)
		}
	}
	s := newSettings("pxe")
	f := addDHCPv6Flags(s)
	if err := s.parse([]string{"--dhcpv6-interface", "br0", "--dhcpv6-server-address", "fd00::1", "--dhcpv6-pool", "fd00::/64,fd00::10,fd00::20", "--router-advertisements"}); err != nil {
		t.Fatal(err)
	}
	cfg, ra, err := f.config("http://10.0.0.1:8080")
	if err != nil || ra == nil || ra.Prefix != netip.MustParsePrefix("fd00::/64") || cfg.HTTPBaseURL != "http://[fd00::1]:8080" {
		t.Errorf("config %+v, ra %+v, err %v", cfg, ra, err)
	}
}
