//go:build linux

package boot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
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
	Addr    net.IPNet
	Gateway net.IP
}

// MACs returns the MAC addresses of all non-loopback interfaces (the
// lookup addresses), read from /sys/class/net.
func MACs() []string {
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
			out = append(out, mac)
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
func BringUpNetwork(ctx context.Context, bootMAC string, log *slog.Logger) ([]Interface, error) {
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
			ifc, err := configure(ctx, name, log)
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

func configure(ctx context.Context, name string, log *slog.Logger) (Interface, error) {
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
	var lastErr error
	for attempt := 1; attempt <= DHCPAttempts; attempt++ {
		c, err := nclient4.New(name, nclient4.WithTimeout(DHCPTimeout/3), nclient4.WithRetry(3))
		if err != nil {
			return ifc, fmt.Errorf("%s: DHCP client: %w", name, err)
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
		ifc.Addr = net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask}
		if r := ack.Router(); len(r) > 0 {
			ifc.Gateway = r[0].To4()
		}
		if err := addAddress(name, ifc.Addr); err != nil {
			return ifc, fmt.Errorf("%s: set address %s: %w", name, ifc.Addr.String(), err)
		}
		log.Info("interface configured", "interface", name, "mac", ifc.MAC, "address", ifc.Addr.String(), "gateway", ifc.Gateway, "server", ack.ServerIPAddr)
		return ifc, nil
	}
	return ifc, fmt.Errorf("%s: DHCP failed after %d attempts: %w", name, DHCPAttempts, lastErr)
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
