package blackhole

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Namespace is a black hole made of dropped packets: a network namespace
// of the test's own, joined to this one by a veth pair, holds a TCP
// forwarder to a target on this namespace's loopback. Peers dial Addr
// (the namespace's end of the pair); Drop points this end's neighbour
// entry for it, and the namespace's for this end, at a MAC address no
// interface has, so that every frame either way is dropped by the
// receiving veth as another host's: connections hang, connects time out,
// nothing is refused or reset. Pass restores the entries.
type Namespace struct {
	name         string
	hostIf, nsIf string
	hostIP, nsIP string
	hostMAC      string
	nsMAC        string
	proxy        *Proxy
}

// bogusMAC is a locally administered unicast address that no interface of
// the test has.
const bogusMAC = "02:00:5e:10:00:01"

// StartNamespace makes the namespace (its name and addresses from the
// process id and index, so that concurrent test processes differ) and a
// forwarder inside it to target. It needs root and iproute2's ip.
func StartNamespace(target string, index int) (_ *Namespace, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a namespace black hole needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("a namespace black hole needs iproute2's ip: %w", err)
	}
	id := (os.Getpid()*7 + index) % 16000
	n := &Namespace{
		name:   fmt.Sprintf("ifbh-%d-%d", os.Getpid(), index),
		hostIf: fmt.Sprintf("bhh%d", id), nsIf: fmt.Sprintf("bhn%d", id),
		// 10.214.0.0/16 in /30s: two hosts each.
		hostIP: fmt.Sprintf("10.214.%d.%d", id/64, id%64*4+1),
		nsIP:   fmt.Sprintf("10.214.%d.%d", id/64, id%64*4+2),
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	for _, args := range [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", n.nsIf},
		{"-n", n.name, "link", "set", n.nsIf, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return nil, err
		}
	}
	if n.hostMAC, err = macOf(n.hostIf, ""); err != nil {
		return nil, err
	}
	if n.nsMAC, err = macOf(n.nsIf, n.name); err != nil {
		return nil, err
	}
	l, err := listenIn(n.name, net.JoinHostPort(n.nsIP, "0"))
	if err != nil {
		return nil, err
	}
	n.proxy = serveOn(l, target)
	return n, nil
}

// Addr is the address to dial in place of the target.
func (n *Namespace) Addr() string { return n.proxy.Addr() }

// Drop turns the black hole on: frames either way go to no one.
func (n *Namespace) Drop() error {
	if err := ip("neigh", "replace", n.nsIP, "lladdr", bogusMAC, "dev", n.hostIf, "nud", "permanent"); err != nil {
		return err
	}
	return ip("-n", n.name, "neigh", "replace", n.hostIP, "lladdr", bogusMAC, "dev", n.nsIf, "nud", "permanent")
}

// Pass turns it off: the retransmissions of the connections that waited
// get through.
func (n *Namespace) Pass() error {
	if err := ip("neigh", "replace", n.nsIP, "lladdr", n.nsMAC, "dev", n.hostIf, "nud", "permanent"); err != nil {
		return err
	}
	return ip("-n", n.name, "neigh", "replace", n.hostIP, "lladdr", n.hostMAC, "dev", n.nsIf, "nud", "permanent")
}

// Close stops the forwarder and removes the namespace and the pair.
func (n *Namespace) Close() {
	if n.proxy != nil {
		n.proxy.Close()
	}
	_ = ip("link", "del", n.hostIf)
	_ = ip("netns", "del", n.name)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// macOf reads an interface's MAC address, in namespace ns ("" for this
// one).
func macOf(ifname, ns string) (string, error) {
	args := []string{"-o", "link", "show", ifname}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "link/ether" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no MAC address for %s in %q", ifname, out)
}

// listenIn opens a TCP listener inside the named namespace: the socket is
// made by a thread that has joined it, and stays there.
func listenIn(ns, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: if it could not go back to its
		// own namespace, it ends with the goroutine.
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("join namespace %s: %w", ns, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, lerr}
	}()
	r := <-ch
	return r.l, r.err
}
