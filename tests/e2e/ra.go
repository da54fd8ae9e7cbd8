package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// raInterval is how often the lab advertises its IPv6 router.
const raInterval = time.Second

// routerAdvertisement is an ICMPv6 router advertisement (RFC 4861 §4.2)
// with no prefix, no flags and router lifetime 0: "there is a router
// here, but not a default one, and no address configuration". It ends
// iPXE's wait for IPv6 autoconfiguration (about 16 s per network boot
// otherwise) and configures nothing. The kernel fills in the checksum.
var routerAdvertisement = []byte{
	134, 0, 0, 0, // type, code, checksum
	64, 0, 0, 0, // cur hop limit, flags, router lifetime 0
	0, 0, 0, 0, // reachable time
	0, 0, 0, 0, // retrans timer
}

// AdvertiseIPv6Router sends routerAdvertisement on the lab's bridge every
// raInterval until the test ends, as a provisioning network with an IPv6
// router would. Sends that fail (the bridge has no link-local address
// until a VM's tap is up) are retried on the next tick.
func (l *Lab) AdvertiseIPv6Router() {
	l.t.Helper()
	ifindex, err := l.ifindex(l.Bridge)
	if err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	fd, err := l.socket(syscall.AF_INET6, syscall.SOCK_RAW, syscall.IPPROTO_ICMPV6)
	if err != nil {
		l.t.Fatalf("lab: ICMPv6 socket in %s: %v", l.Netns, err)
	}
	// NDP messages carry hop limit 255, which proves they were not routed.
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_MULTICAST_HOPS, 255); err != nil {
		syscall.Close(fd)
		l.t.Fatalf("lab: set ICMPv6 hop limit: %v", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_MULTICAST_IF, ifindex); err != nil {
		syscall.Close(fd)
		l.t.Fatalf("lab: set ICMPv6 interface: %v", err)
	}
	allNodes := &syscall.SockaddrInet6{Addr: [16]byte{0xff, 0x02, 15: 1}, ZoneId: uint32(ifindex)}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(raInterval)
		defer t.Stop()
		for {
			_ = syscall.Sendto(fd, routerAdvertisement, 0, allNodes)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	l.t.Cleanup(func() {
		close(stop)
		<-done
		syscall.Close(fd)
	})
}

// ifindex is the index of a link inside the lab's namespace.
func (l *Lab) ifindex(link string) (int, error) {
	out, err := exec.Command("ip", "-n", l.Netns, "-o", "link", "show", link).Output()
	if err != nil {
		return 0, fmt.Errorf("index of %s: %w", link, err)
	}
	idx, _, _ := strings.Cut(string(out), ":")
	n, err := strconv.Atoi(idx)
	if err != nil {
		return 0, fmt.Errorf("index of %s in %q: %w", link, out, err)
	}
	return n, nil
}

// socket opens a socket inside the lab's namespace: a socket stays in the
// namespace it was created in, so only its creation needs the thread to
// enter the namespace.
func (l *Lab) socket(domain, typ, proto int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, restored, err := socketInNetns("/run/netns/"+l.Netns, domain, typ, proto)
		if restored {
			runtime.UnlockOSThread()
		} // else: the thread stays locked and exits with this goroutine.
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

func socketInNetns(nsPath string, domain, typ, proto int) (fd int, restored bool, err error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return -1, true, err
	}
	defer orig.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return -1, true, err
	}
	defer target.Close()
	if err := setns(target.Fd()); err != nil {
		return -1, true, fmt.Errorf("enter %s: %w", nsPath, err)
	}
	fd, err = syscall.Socket(domain, typ|syscall.SOCK_CLOEXEC, proto)
	if rerr := setns(orig.Fd()); rerr != nil {
		if err == nil {
			syscall.Close(fd)
		}
		return -1, false, fmt.Errorf("return from %s: %w", nsPath, rerr)
	}
	return fd, true, err
}

func setns(fd uintptr) error {
	if _, _, e := syscall.RawSyscall(sysSetns, fd, syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}
