package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/ironflow/ironflow/pxe"
)

// Sizes of the boot part.
const (
	// dhcpMachines have boot configs; DISCOVERs cycle through their MACs.
	dhcpMachines = 1000
	// udpClients send DISCOVERs closed-loop over the UDP socket.
	udpClients = 32
	// udpReplyTimeout: a lost datagram costs this much, then the client
	// sends the next one.
	udpReplyTimeout = 500 * time.Millisecond
	kernelSize      = 8 << 20
	initrdSize      = 30 << 20
	// bootRounds: each HTTP server is measured this many times.
	bootRounds = 2
	// downloadTimeout bounds all downloads of one server.
	downloadTimeout = 5 * time.Minute
)

func benchBoot(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	backend, h, discovers, err := newDHCPSetup()
	if err != nil {
		return nil, err
	}
	var rows []Row

	// The handler alone, one goroutine per CPU, vs decoding and encoding
	// the same packets (the part of the work that is the DHCP library's).
	wire := make([][]byte, len(discovers))
	for i, d := range discovers {
		wire[i] = d.ToBytes()
	}
	handled, err := loopRate(ctx, cfg.dhcpDuration, numCPU(), func(i int) bool {
		reply, _ := h.HandleBytes(ctx, wire[i%len(wire)])
		if reply == nil || reply.MessageType() != dhcpv4.MessageTypeOffer {
			return false
		}
		_ = reply.ToBytes()
		return true
	})
	if err != nil {
		return nil, err
	}
	codec, err := loopRate(ctx, cfg.dhcpDuration, numCPU(), func(i int) bool {
		p, err := dhcpv4.FromBytes(wire[i%len(wire)])
		if err != nil {
			return false
		}
		_ = p.ToBytes()
		return true
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, row("boot", fmt.Sprintf("DHCP offers from pxe.DHCPHandler.HandleBytes (%d machines, in memory, %d goroutines)", dhcpMachines, numCPU()), handled, "offers/s").
		vs("decode + encode the same packets only", codec))

	// DHCPv6: the same machines' UEFI PXE Solicits, against the DHCPv4
	// offers just measured.
	h6, solicits, err := newDHCPv6Setup(backend)
	if err != nil {
		return nil, err
	}
	handled6, err := loopRate(ctx, cfg.dhcpDuration, numCPU(), func(i int) bool {
		s := solicits[i%len(solicits)]
		return h6.HandleBytes(ctx, s.wire, s.peer) != nil
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, row("boot", fmt.Sprintf("DHCPv6 advertises from pxe.DHCPv6Handler.HandleBytes (%d machines, in memory, %d goroutines)", dhcpMachines, numCPU()), handled6, "answers/s").
		vs("DHCPv4 offers from pxe.DHCPHandler.HandleBytes, same machines", handled))

	// Over UDP on 127.0.0.1: the real pxe.DHCPServer on a free port, vs a
	// socket loop of the same shape that only echoes the packet (what the
	// round trips through the kernel cost on their own).
	udp, err := dhcpServerRate(ctx, cfg.dhcpDuration, backend, wire)
	if err != nil {
		return nil, err
	}
	echo, err := echoRate(ctx, cfg.dhcpDuration, wire)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row("boot", fmt.Sprintf("DHCP offers over UDP on 127.0.0.1 (%d closed-loop clients)", udpClients), udp, "offers/s").
		vs("socket loop of the same shape echoing the packet", echo).
		note("the real pxe.DHCPServer, listening on 127.0.0.1:<free port> (DHCPConfig.Listen)"))
	log.Info("dhcp measured", "handler", handled, "udp", udp)

	// HTTP boot: kernel + initramfs by many clients at once.
	images := filepath.Join(dir, "boot-images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return rows, err
	}
	defer os.RemoveAll(images)
	for name, size := range map[string]int{"agent.kernel": kernelSize, "agent.initramfs": initrdSize} {
		b := make([]byte, size)
		_, _ = crand.Read(b)
		if err := os.WriteFile(filepath.Join(images, name), b, 0o644); err != nil {
			return rows, fmt.Errorf("write %s: %w", name, err)
		}
	}
	ph, err := pxe.NewHTTPHandler(pxe.HTTPConfig{ImagesDir: images}, backend, nil)
	if err != nil {
		return rows, err
	}
	plain := http.NewServeMux()
	plain.Handle("GET /images/", http.StripPrefix("/images/", http.FileServer(http.Dir(images))))
	// Each server twice, in opposite orders, keeping its best: the first
	// run after writing the files and the machine's other users move single
	// runs. The wrapped file server is a diagnosis: a ResponseWriter that
	// records the status, as request logging does, hides io.ReaderFrom, so
	// the server cannot hand the file to sendfile(2).
	servers := []struct {
		name string
		h    http.Handler
	}{{"pxe", ph}, {"plain", plain}, {"wrapped", hideReaderFrom(plain)}}
	best := map[string]float64{}
	p99 := map[string]time.Duration{}
	cpuPerGiB := map[string]time.Duration{}
	for round := range bootRounds {
		for k := range servers {
			if round%2 == 1 {
				k = len(servers) - 1 - k
			}
			s := servers[k]
			rate, tail, cpu, err := downloadRate(ctx, s.h, cfg.bootClients)
			if err != nil {
				return rows, fmt.Errorf("%s HTTP: %w", s.name, err)
			}
			best[s.name] = max(best[s.name], rate)
			if cpuPerGiB[s.name] == 0 || cpu < cpuPerGiB[s.name] {
				cpuPerGiB[s.name] = cpu
			}
			if p99[s.name] == 0 || tail < p99[s.name] {
				p99[s.name] = tail
			}
		}
	}
	pxeRate, plainRate, wrappedRate := best["pxe"], best["plain"], best["wrapped"]
	pxeP99, plainP99 := p99["pxe"], p99["plain"]
	rows = append(rows,
		row("boot", fmt.Sprintf("kernel (8 MiB) + initramfs (30 MiB) downloads by %d concurrent clients, pxe.NewHTTPHandler, best of %d", cfg.bootClients, bootRounds), pxeRate, "MiB/s").
			vs("http.FileServer, same files", plainRate),
		row("boot", "time per client (both files) p99", pxeP99.Seconds(), "s").vs("http.FileServer", plainP99.Seconds()),
		row("boot", "CPU per GiB served (server and clients, one process)", ms(cpuPerGiB["pxe"]), "ms").vs("http.FileServer", ms(cpuPerGiB["plain"])),
		row("boot", "diagnosis: http.FileServer behind a status-recording ResponseWriter (no ReadFrom, so no sendfile)", wrappedRate, "MiB/s").
			vs("http.FileServer", plainRate).note(fmt.Sprintf("CPU per GiB %.0f ms", ms(cpuPerGiB["wrapped"]))),
	)
	log.Info("http boot measured", "pxe", pxeRate, "plain", plainRate)
	return rows, nil
}

// newDHCPSetup is a reservation-mode handler with dhcpMachines boot configs
// and one DISCOVER from each machine, shaped as SeaBIOS's iPXE sends it.
func newDHCPSetup() (*pxe.MemoryBackend, *pxe.DHCPHandler, []*dhcpv4.DHCPv4, error) {
	backend := pxe.NewMemoryBackend()
	var discovers []*dhcpv4.DHCPv4
	for i := range dhcpMachines {
		mac := net.HardwareAddr{0x52, 0x57, 0, 0, byte(i >> 8), byte(i)}
		uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		if err := backend.Put(pxe.BootConfig{NodeUUID: uuid, MACs: []string{mac.String()}, BootMode: pxe.BootModeBIOS, Method: pxe.MethodPXE,
			Kind: "agent", KernelURL: "http://10.98.0.1:8080/images/agent.kernel", InitrdURL: "http://10.98.0.1:8080/images/agent.initramfs"}); err != nil {
			return nil, nil, nil, err
		}
		d, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
			dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 0}))
		if err != nil {
			return nil, nil, nil, err
		}
		discovers = append(discovers, d)
	}
	h, err := pxe.NewDHCPHandler(dhcpConfig(), backend, pxe.NewMemoryLeases(), nil)
	return backend, h, discovers, err
}

// solicit6 is one machine's DHCPv6 Solicit and the link-local address it
// comes from (the MAC's modified EUI-64, RFC 4291 appendix A).
type solicit6 struct {
	wire []byte
	peer netip.Addr
}

// newDHCPv6Setup builds a DHCPv6 handler over backend's machines and one
// UEFI PXE Solicit per machine (DUID-UUID, as OVMF sends).
func newDHCPv6Setup(backend *pxe.MemoryBackend) (*pxe.DHCPv6Handler, []solicit6, error) {
	var out []solicit6
	for i := range dhcpMachines {
		mac := net.HardwareAddr{0x52, 0x57, 0, 0, byte(i >> 8), byte(i)}
		m, err := dhcpv6.NewSolicit(mac,
			dhcpv6.WithClientID(&dhcpv6.DUIDUUID{UUID: [16]byte{0: byte(i >> 8), 1: byte(i)}}),
			dhcpv6.WithRequestedOptions(dhcpv6.OptionBootfileURL),
			dhcpv6.WithArchType(iana.EFI_X86_64),
			dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("PXEClient:Arch:00007:UNDI:003016")}}))
		if err != nil {
			return nil, nil, err
		}
		ll := netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]})
		out = append(out, solicit6{wire: m.ToBytes(), peer: ll})
	}
	h, err := pxe.NewDHCPv6Handler(pxe.DHCPv6Config{
		Addr: netip.MustParseAddr("fd98::1"), HTTPBaseURL: "http://[fd98::1]:8080",
		Pools: []pxe.DHCPv6Pool{{Prefix: netip.MustParsePrefix("fd98::/64"), First: netip.MustParseAddr("fd98::1:0"), Last: netip.MustParseAddr("fd98::1:ffff")}},
	}, backend, pxe.NewMemoryLeases(), nil)
	return h, out, err
}

// dhcpConfig is the reservation-mode configuration of the DHCP measures.
// The pool is larger than the machines, so every DISCOVER gets an offer.
func dhcpConfig() pxe.DHCPConfig {
	return pxe.DHCPConfig{
		Mode: pxe.DHCPModeReservation, Interface: "bench0", Addr: netip.MustParseAddr("10.98.0.1"), HTTPBaseURL: "http://10.98.0.1:8080",
		Pools: []pxe.DHCPPool{{Subnet: netip.MustParsePrefix("10.98.0.0/20"), First: netip.MustParseAddr("10.98.1.0"), Last: netip.MustParseAddr("10.98.15.250")}},
	}
}

// loopRate calls fn from workers goroutines for d: successful calls per second.
func loopRate(ctx context.Context, d time.Duration, workers int, fn func(i int) bool) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += workers {
				if fn(i) {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() > 0 && ok.Load() == 0 {
		return 0, errors.New("no call succeeded")
	}
	return float64(ok.Load()) / time.Since(start).Seconds(), nil
}

// startDHCPServer runs the real pxe.DHCPServer of the bench's
// configuration on 127.0.0.1 at a free port until stop is called; stop
// returns Serve's error.
func startDHCPServer(ctx context.Context, backend pxe.Backend) (srv *pxe.DHCPServer, stop func() error, err error) {
	c := dhcpConfig()
	c.Interface = ""
	c.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	srv, err = pxe.NewDHCPServer(c, backend, pxe.NewMemoryLeases(), nil)
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return srv, func() error { cancel(); return <-done }, nil
}

// dhcpServerRate measures the offers per second udpClients closed-loop
// clients receive from the real pxe.DHCPServer.
func dhcpServerRate(ctx context.Context, d time.Duration, backend pxe.Backend, packets [][]byte) (float64, error) {
	srv, stop, err := startDHCPServer(ctx, backend)
	if err != nil {
		return 0, fmt.Errorf("start DHCP server: %w", err)
	}
	rate, err := udpClientsRate(ctx, d, srv.LocalAddr().(*net.UDPAddr), packets)
	if serr := stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("DHCP server: %w", serr))
	}
	return rate, err
}

// echoRate serves a socket loop shaped like pxe.DHCPServer's (a goroutine
// per datagram, at most 64 at once, the reply to the sender) that echoes
// each packet, and measures it as dhcpServerRate does.
func echoRate(ctx context.Context, d time.Duration, packets [][]byte) (float64, error) {
	srv, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen UDP: %w", err)
	}
	defer srv.Close()
	go func() {
		sem := make(chan struct{}, 64)
		for {
			buf := make([]byte, 4096)
			n, peer, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				_, _ = srv.WriteTo(buf[:n], peer)
			}()
		}
	}()
	return udpClientsRate(ctx, d, srv.LocalAddr().(*net.UDPAddr), packets)
}

// udpClientsRate has udpClients closed-loop clients send packets to addr
// for d: replies received per second.
func udpClientsRate(ctx context.Context, d time.Duration, addr *net.UDPAddr, packets [][]byte) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var got atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, udpClients)
	start := time.Now()
	for c := range udpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.DialUDP("udp4", nil, addr)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			buf := make([]byte, 4096)
			for i := c; ctx.Err() == nil; i += udpClients {
				if _, err := conn.Write(packets[i%len(packets)]); err != nil {
					errs <- err
					return
				}
				_ = conn.SetReadDeadline(time.Now().Add(udpReplyTimeout))
				if _, err := conn.Read(buf); err == nil {
					got.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("UDP client: %w", err)
	}
	if got.Load() == 0 {
		return 0, fmt.Errorf("no reply from %s", addr)
	}
	return float64(got.Load()) / time.Since(start).Seconds(), nil
}

// downloadRate serves h on 127.0.0.1 and has clients fetch the kernel and
// the initramfs at once: aggregate MiB/s and the p99 time per client.
func downloadRate(ctx context.Context, h http.Handler, clients int) (float64, time.Duration, time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, 0, err
	}
	srv := pxe.NewHTTPServer(ln.Addr().String(), h)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/images/"
	hc := newHTTPClient(clients)
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	var total atomic.Int64
	times := make([]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	cpu0 := procCPU(os.Getpid())
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			for _, name := range []string{"agent.kernel", "agent.initramfs"} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+name, nil)
				resp, err := hc.Do(req)
				if err != nil {
					errs[c] = err
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					errs[c] = fmt.Errorf("GET %s: HTTP %d: %v", name, resp.StatusCode, err)
					return
				}
				total.Add(n)
			}
			times[c] = time.Since(t0)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := procCPU(os.Getpid()) - cpu0
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	if want := int64(clients) * (kernelSize + initrdSize); total.Load() != want {
		return 0, 0, 0, fmt.Errorf("downloaded %d bytes, want %d", total.Load(), want)
	}
	perGiB := time.Duration(float64(cpu) / (float64(total.Load()) / (1 << 30)))
	return float64(total.Load()) / (1 << 20) / wall.Seconds(), percentile(times, 99), perGiB, nil
}

// hideReaderFrom wraps every ResponseWriter in a type that only records the
// status, as a logging middleware does.
func hideReaderFrom(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&recordingWriter{ResponseWriter: w}, r)
	})
}

type recordingWriter struct {
	http.ResponseWriter
	status int
}

func (w *recordingWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
