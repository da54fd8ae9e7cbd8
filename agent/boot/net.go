//go:build linux

package boot

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"golang.org/x/sys/unix"
)

// Network defaults.
const (
	// CarrierWait is how long an interface may take to report a link after
	// it is set up.
	CarrierWait = 10 * time.Second
	// DHCPTimeout bounds one DHCP exchange attempt; DHCPAttempts are made.
	DHCPTimeout  = 10 * time.Second
	DHCPAttempts = 6
)

// Interface is a configured network interface.
type Interface struct {
	Name    string
	MAC     string
	Addr    net.IPNet // IPv4, zero when DHCPv4 gave none
	Gateway net.IP
	Addr6   net.IP // from DHCPv6, nil when it gave none
}

// MACs returns the MAC addresses of all non-loopback interfaces (the
// lookup addresses), read from /sys/class/net.
func MACs() []string {
	var out []string
	for _, name := range Interfaces() {
		out = append(out, readFile(filepath.Join("/sys/class/net", name, "address")))
	}
	return out
}

// Interfaces are the names of the machine's Ethernet interfaces with a MAC
// address (what MACs lists the addresses of).
func Interfaces() []string {
	var out []string
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		if e.Name() == "lo" {
			continue
		}
		if t := readFile(filepath.Join("/sys/class/net", e.Name(), "type")); t != "1" {
			continue // not Ethernet
		}
		if mac := readFile(filepath.Join("/sys/class/net", e.Name(), "address")); mac != "" && mac != "00:00:00:00:00:00" {
			out = append(out, e.Name())
		}
	}
	return out
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// BringUpNetwork sets every Ethernet interface up, waits for carrier, and
// runs DHCP on those with a link, in parallel. bootMAC (from BOOTIF), when
// set, is preferred for the default route. It returns the configured
// interfaces; an error only when none could be configured.
func BringUpNetwork(ctx context.Context, bootMAC string, fam Families, log *slog.Logger) ([]Interface, error) {
	if err := linkUp("lo"); err != nil {
		log.Warn("bring up lo failed", "err", err)
	}
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		done []Interface
		errs []error
	)
	for _, e := range ents {
		name := e.Name()
		if name == "lo" || readFile(filepath.Join("/sys/class/net", name, "type")) != "1" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ifc, err := configure(ctx, name, fam, log)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			done = append(done, ifc)
		}()
	}
	wg.Wait()
	if len(done) == 0 {
		return nil, fmt.Errorf("no interface got an address: %w", errors.Join(errs...))
	}
	for _, err := range errs {
		log.Info("interface not configured", "err", err)
	}
	// One default route: the boot interface's gateway, else the first.
	pick := done[0]
	for _, d := range done {
		if strings.EqualFold(d.MAC, bootMAC) {
			pick = d
		}
	}
	if pick.Gateway != nil {
		if err := addDefaultRoute(pick.Name, pick.Gateway); err != nil {
			log.Warn("default route failed", "interface", pick.Name, "gateway", pick.Gateway, "err", err)
		}
	}
	return done, nil
}

// Families are the address families the agent asks DHCP for.
type Families struct{ V4, V6 bool }

// FamiliesFor picks the families that reach the API at apiURL: only IPv4
// for an IPv4 literal (no DHCPv6 wait on IPv4 networks), only IPv6 for a
// bracketed IPv6 literal, both for a host name.
func FamiliesFor(apiURL string) Families {
	u, err := url.Parse(apiURL)
	if err != nil {
		return Families{V4: true, V6: true}
	}
	a, err := netip.ParseAddr(u.Hostname())
	switch {
	case err != nil:
		return Families{V4: true, V6: true}
	case a.Is4() || a.Is4In6():
		return Families{V4: true}
	default:
		return Families{V6: true}
	}
}

// configure brings name up and runs DHCPv4 and DHCPv6 (those of fam) on it
// at once. With both, once one family has an address the other gets one
// more DHCPTimeout, so a segment without the other family's server costs
// that much, not every attempt.
func configure(ctx context.Context, name string, fam Families, log *slog.Logger) (Interface, error) {
	ifc := Interface{Name: name, MAC: readFile(filepath.Join("/sys/class/net", name, "address"))}
	if err := linkUp(name); err != nil {
		return ifc, fmt.Errorf("set %s up: %w", name, err)
	}
	deadline := time.Now().Add(CarrierWait)
	for readFile(filepath.Join("/sys/class/net", name, "carrier")) != "1" {
		if time.Now().After(deadline) {
			return ifc, fmt.Errorf("%s: no carrier after %s", name, CarrierWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once        sync.Once
		wg          sync.WaitGroup
		err4, err6  error
		addr4       net.IPNet
		gw4, addr6  net.IP
		gotOne      = make(chan struct{})
		markSuccess = func() { once.Do(func() { close(gotOne) }) }
	)
	err4, err6 = errors.New("not asked"), errors.New("not asked")
	if fam.V4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if addr4, gw4, err4 = dhcp4(ctx, name, log); err4 == nil {
				markSuccess()
			}
		}()
	}
	if fam.V6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if addr6, err6 = dhcp6(ctx, name, log); err6 == nil {
				markSuccess()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-gotOne:
		select {
		case <-done:
		case <-time.After(DHCPTimeout):
			cancel()
			<-done
		}
	}
	if err4 != nil && err6 != nil {
		return ifc, fmt.Errorf("%s: no address: DHCPv4: %w; DHCPv6: %w", name, err4, err6)
	}
	ifc.Addr, ifc.Gateway, ifc.Addr6 = addr4, gw4, addr6
	log.Info("interface configured", "interface", name, "mac", ifc.MAC, "address", ifc.Addr.String(), "gateway", ifc.Gateway, "address6", ifc.Addr6)
	return ifc, nil
}

// dhcp4 leases an IPv4 address and sets it on name.
func dhcp4(ctx context.Context, name string, log *slog.Logger) (net.IPNet, net.IP, error) {
	var lastErr error
	for attempt := 1; attempt <= DHCPAttempts && ctx.Err() == nil; attempt++ {
		c, err := nclient4.New(name, nclient4.WithTimeout(DHCPTimeout/3), nclient4.WithRetry(3))
		if err != nil {
			return net.IPNet{}, nil, fmt.Errorf("DHCP client: %w", err)
		}
		actx, cancel := context.WithTimeout(ctx, DHCPTimeout)
		lease, err := c.Request(actx)
		cancel()
		c.Close()
		if err != nil {
			lastErr = err
			log.Info("DHCP attempt failed", "interface", name, "attempt", attempt, "err", err)
			continue
		}
		ack := lease.ACK
		mask := ack.SubnetMask()
		if mask == nil {
			mask = ack.YourIPAddr.DefaultMask()
		}
		addr := net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}
		var gw net.IP
		if r := ack.Router(); len(r) > 0 {
			gw = r[0].To4()
		}
		if err := addAddress(name, addr); err != nil {
			return addr, gw, fmt.Errorf("set address %s: %w", addr.String(), err)
		}
		log.Info("DHCPv4 lease", "interface", name, "address", addr.String(), "gateway", gw, "server", ack.ServerIPAddr)
		return addr, gw, nil
	}
	return net.IPNet{}, nil, fmt.Errorf("DHCP failed after %d attempts: %w", DHCPAttempts, errors.Join(lastErr, ctx.Err()))
}

// dhcp6 leases an IPv6 address (stateful DHCPv6, RFC 8415 §18) and sets
// it on name as a /128: the on-link prefix and the default route come
// from the segment's router advertisements, which the kernel applies.
func dhcp6(ctx context.Context, name string, log *slog.Logger) (net.IP, error) {
	var lastErr error
	for attempt := 1; attempt <= DHCPAttempts && ctx.Err() == nil; attempt++ {
		// The client binds the link-local address, usable once duplicate
		// address detection is over (about a second after link up).
		c, err := nclient6.New(name, nclient6.WithTimeout(DHCPTimeout/3), nclient6.WithRetry(3))
		if err != nil {
			lastErr = err
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		actx, cancel := context.WithTimeout(ctx, DHCPTimeout)
		var reply *dhcpv6.Message
		adv, err := c.Solicit(actx)
		if err == nil {
			reply, err = c.Request(actx, adv)
		}
		cancel()
		c.Close()
		if err != nil {
			lastErr = err
			log.Info("DHCPv6 attempt failed", "interface", name, "attempt", attempt, "err", err)
			continue
		}
		var ip net.IP
		if ia := reply.Options.OneIANA(); ia != nil {
			if a := ia.Options.OneAddress(); a != nil {
				ip = a.IPv6Addr
			}
		}
		if ip == nil {
			lastErr = errors.New("the DHCPv6 reply holds no address")
			continue
		}
		if err := addAddress6(name, ip); err != nil {
			return nil, fmt.Errorf("set address %s: %w", ip, err)
		}
		// A tentative address is no source address (RFC 4862 §5.4): until
		// duplicate address detection ends, the kernel would send the
		// agent's lookup from its link-local address, and that would
		// become its callback URL.
		if err := waitDAD(ctx, name, ip, dadWait); err != nil {
			return nil, fmt.Errorf("address %s: %w", ip, err)
		}
		log.Info("DHCPv6 lease", "interface", name, "address", ip.String())
		return ip, nil
	}
	return nil, fmt.Errorf("DHCPv6 failed after %d attempts: %w", DHCPAttempts, errors.Join(lastErr, ctx.Err()))
}

func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// netlink sends one request and waits for its acknowledgement.
func netlink(msgType uint16, flags uint16, body []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], msgType)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	// The answer to a single request is one NLMSG_ERROR (code 0 = ack).
	if n < unix.NLMSG_HDRLEN+4 {
		return fmt.Errorf("short netlink answer (%d bytes)", n)
	}
	if binary.NativeEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); code != 0 {
			return unix.Errno(-code)
		}
	}
	return nil
}

func rtattr(typ uint16, data []byte) []byte {
	l := 4 + len(data)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

func addAddress(name string, addr net.IPNet) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	ones, _ := addr.Mask.Size()
	// struct ifaddrmsg
	body := []byte{unix.AF_INET, byte(ones), 0, unix.RT_SCOPE_UNIVERSE, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(body[4:], uint32(ifi.Index))
	ip := addr.IP.To4()
	body = append(body, rtattr(unix.IFA_LOCAL, ip)...)
	body = append(body, rtattr(unix.IFA_ADDRESS, ip)...)
	bcast := make(net.IP, 4)
	for i := range 4 {
		bcast[i] = ip[i] | ^addr.Mask[i]
	}
	body = append(body, rtattr(unix.IFA_BROADCAST, bcast)...)
	err = netlink(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

// dadWait bounds the wait for duplicate address detection (one probe,
// RetransTimer 1 s, by default).
const dadWait = 10 * time.Second

// Flags of /proc/net/if_inet6 (IFA_F_* of rtnetlink(7)).
const (
	ifaFlagDADFailed = 0x08
	ifaFlagTentative = 0x40
)

// waitDAD waits until ip on name is no longer tentative, reading
// /proc/net/if_inet6 (address, index, prefix length, scope, flags, name).
func waitDAD(ctx context.Context, name string, ip net.IP, bound time.Duration) error {
	want := hex.EncodeToString(ip.To16())
	deadline := time.Now().Add(bound)
	for {
		b, err := os.ReadFile("/proc/net/if_inet6")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 6 || f[0] != want || f[5] != name {
				continue
			}
			flags, err := strconv.ParseUint(f[4], 16, 32)
			if err != nil {
				return err
			}
			if flags&ifaFlagDADFailed != 0 {
				return errors.New("duplicate address detection failed: another machine has it")
			}
			if flags&ifaFlagTentative == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still tentative after %s", bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// addAddress6 sets ip/128 on name.
func addAddress6(name string, ip net.IP) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	body := []byte{unix.AF_INET6, 128, 0, unix.RT_SCOPE_UNIVERSE, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(body[4:], uint32(ifi.Index))
	body = append(body, rtattr(unix.IFA_ADDRESS, ip.To16())...)
	err = netlink(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}

func addDefaultRoute(name string, gw net.IP) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return err
	}
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
	body := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_DHCP, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST, 0, 0, 0, 0}
	body = append(body, rtattr(unix.RTA_GATEWAY, gw.To4())...)
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, uint32(ifi.Index))
	body = append(body, rtattr(unix.RTA_OIF, oif)...)
	err = netlink(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}
