package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/vbmc"
)

// Helpers of the ramdisk, anaconda and inspection scenarios: VMs whose
// size the scenario chooses (the shared helpers give every VM the agent's
// defaults), HTTP from inside the lab, and reading a VM's disk file.

// issue8HTTPTimeout bounds one HTTP exchange with a lab service.
const issue8HTTPTimeout = 30 * time.Second

// issue8VM is the vbmc definition of vm with the scenario's CPUs, memory
// and disk size; the VM's tap is its NIC.
func issue8VM(vm *LabVM, cpus, memoryMB int, diskSize string) vbmc.VM {
	return vbmc.VM{Name: vm.Name, MAC: vm.MAC, Disk: vm.Disk, DiskSize: diskSize, MemoryMB: memoryMB, CPUs: cpus,
		Firmware: vm.Firmware, Netdev: "tap:" + vm.Tap, SerialLog: vm.SerialLog}
}

func issue8Accel() string {
	if Accel() == AccelKVM {
		return vbmc.AccelKVM
	}
	return vbmc.AccelTCG
}

func issue8Password() string {
	var pw [8]byte
	_, _ = rand.Read(pw[:])
	return hex.EncodeToString(pw[:])
}

func issue8WriteConfig(t *testing.T, path string, cfg vbmc.Config) {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue8StartIPMISim is startIPMISim for a VM definition of the scenario's
// own: `ironflow vbmc ipmi-sim` (OpenIPMI's ipmi_sim, QEMU started by its
// chassis control) inside the lab.
func issue8StartIPMISim(t *testing.T, s *stack, vm vbmc.VM, password string) *Process {
	t.Helper()
	path := filepath.Join(s.lab.Dir, "vbmc-ipmi-"+vm.Name+".json")
	issue8WriteConfig(t, path, vbmc.Config{StateDir: filepath.Join(s.lab.Dir, "vbmc"), Username: "admin",
		Password: password, Accel: issue8Accel(), VMs: []vbmc.VM{vm}})
	p := s.lab.Start("vbmc-ipmi-"+vm.Name, nil, s.bin, "vbmc", "ipmi-sim", "--config", path, "--vm", vm.Name, "--listen", ipmiSimListen)
	s.procs = append(s.procs, p)
	ctx, cancel := context.WithTimeout(context.Background(), ipmiSimReadyTimeout)
	defer cancel()
	if _, err := waitLine(ctx, p.Log, "ipmi_sim listening", p.Exited()); err != nil {
		t.Fatalf("ironflow vbmc ipmi-sim: %v\n%s", err, Tail(p.Log, 2000))
	}
	return p
}

// issue8CreateIPMINode enrolls the VM behind issue8StartIPMISim with the
// baremetal CLI, its port included, and returns the node's UUID.
func issue8CreateIPMINode(t *testing.T, s *stack, vm *LabVM, name, password string, extra ...string) string {
	t.Helper()
	args := []string{"node", "create", "--name", name, "--driver", "ipmi", "--boot-interface", "ipxe",
		"--driver-info", "ipmi_address=127.0.0.1",
		"--driver-info", "ipmi_port=" + strings.Split(ipmiSimListen, ":")[1],
		"--driver-info", "ipmi_username=admin",
		"--driver-info", "ipmi_password=" + password,
		"--property", "capabilities=boot_mode:" + vm.Firmware,
		"-f", "value", "-c", "uuid"}
	uuid := strings.TrimSpace(s.mustCLI(t, append(args, extra...)...))
	t.Logf("node %s (VM %s) is %s", name, vm.Name, uuid)
	s.mustCLI(t, "port", "create", vm.MAC, "--node", uuid)
	return uuid
}

// issue8StartRedfish is startVBMC for VM definitions of the scenario's own.
func issue8StartRedfish(t *testing.T, s *stack, vms ...vbmc.VM) *vbmcServer {
	t.Helper()
	v := &vbmcServer{password: issue8Password(), stateDir: filepath.Join(s.lab.Dir, "vbmc-redfish")}
	path := filepath.Join(s.lab.Dir, "vbmc-redfish.json")
	issue8WriteConfig(t, path, vbmc.Config{StateDir: v.stateDir, Username: "admin", Password: v.password,
		MediaNetworks: []string{LabNetwork}, Accel: issue8Accel(), VMs: vms})
	v.proc = s.lab.Start("vbmc-redfish", nil, s.bin, "vbmc", "serve", "--config", path, "--listen", redfishListen)
	s.procs = append(s.procs, v.proc)
	s.waitHTTP(t, "http://"+redfishListen+"/redfish/v1", v.proc)
	return v
}

// issue8CreateRedfishNode enrolls a VM behind issue8StartRedfish; mac ""
// creates no port (inspection is to find it).
func issue8CreateRedfishNode(t *testing.T, s *stack, v *vbmcServer, vmName, firmware, mac string, extra ...string) string {
	t.Helper()
	args := []string{"node", "create", "--name", vmName, "--driver", "redfish",
		"--driver-info", "redfish_address=http://" + redfishListen,
		"--driver-info", "redfish_system_id=/redfish/v1/Systems/" + vmName,
		"--driver-info", "redfish_username=admin",
		"--driver-info", "redfish_password=" + v.password,
		"--property", "capabilities=boot_mode:" + firmware,
		"-f", "value", "-c", "uuid"}
	uuid := strings.TrimSpace(s.mustCLI(t, append(args, extra...)...))
	t.Logf("node %s is %s", vmName, uuid)
	if mac != "" {
		s.mustCLI(t, "port", "create", mac, "--node", uuid)
	}
	return uuid
}

// issue8PublishImage puts src into the boot service's images directory as
// name and returns its URL as the lab's machines reach it.
func issue8PublishImage(t *testing.T, s *stack, src, name string) string {
	t.Helper()
	if err := linkOrCopy(src, filepath.Join(s.imagesDir, name)); err != nil {
		t.Fatalf("publish %s as %s: %v", src, name, err)
	}
	return s.imageURL(name)
}

// issue8LabClient is an HTTP client whose connections are made from inside
// the lab's namespace, where ironflow's services listen.
func issue8LabClient(lab *Lab) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip := net.ParseIP(host).To4()
		p, err := strconv.Atoi(port)
		if ip == nil || err != nil {
			return nil, fmt.Errorf("lab HTTP client: %q is not an IPv4 address and port", addr)
		}
		fd, err := lab.socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			return nil, fmt.Errorf("lab HTTP client: socket in %s: %w", lab.Netns, err)
		}
		sa := &syscall.SockaddrInet4{Port: p}
		copy(sa.Addr[:], ip)
		if err := syscall.Connect(fd, sa); err != nil {
			syscall.Close(fd)
			return nil, fmt.Errorf("lab HTTP client: connect %s: %w", addr, err)
		}
		f := os.NewFile(uintptr(fd), "lab-http")
		defer f.Close()
		return net.FileConn(f)
	}
	return &http.Client{Timeout: issue8HTTPTimeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// issue8Get fetches url from inside the lab with the given headers
// (name, value pairs) and returns the status code and body.
func issue8Get(t *testing.T, lab *Lab, url string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := issue8LabClient(lab).Do(req)
	if err != nil {
		t.Fatalf("GET %s in the lab: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s in the lab: read body: %v", url, err)
	}
	return resp.StatusCode, body
}

// seekData and seekHole are lseek(2)'s SEEK_DATA and SEEK_HOLE.
const (
	seekData = 3
	seekHole = 4
)

// issue8FirstNonZero returns the offset of the first non-zero byte of the
// disk file, or -1 when it holds only zeros. It reads only the file's data
// extents (SEEK_DATA), so a sparse multi-GiB disk is checked in moments.
func issue8FirstNonZero(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for off < st.Size() {
		data, err := syscall.Seek(int(f.Fd()), off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return -1, nil // no data after off: a hole to the end
		}
		if err != nil {
			return 0, fmt.Errorf("seek data in %s: %w", path, err)
		}
		hole, err := syscall.Seek(int(f.Fd()), data, seekHole)
		if err != nil {
			return 0, fmt.Errorf("seek hole in %s: %w", path, err)
		}
		for pos := data; pos < hole; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), hole-pos)], pos)
			if len(bytes.Trim(buf[:n], "\x00")) > 0 {
				for j, b := range buf[:n] {
					if b != 0 {
						return pos + int64(j), nil
					}
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, fmt.Errorf("read %s: %w", path, err)
			}
			if n == 0 {
				break
			}
			pos += int64(n)
		}
		off = hole
	}
	return -1, nil
}

// issue8Fatal fails the test with what explains a failed step: the node,
// the stack's logs and the VM's console.
func issue8Fatal(t *testing.T, s *stack, uuid, serialLog string, err error) {
	t.Helper()
	t.Fatalf("%v\nnode: %s\n%s\nVM console tail:\n%s", err, s.nodeShow(t, uuid), s.logTail(), Tail(serialLog, 3000))
}
