package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// labHTTPTimeout bounds one HTTP exchange with a lab service.
const labHTTPTimeout = 30 * time.Second

// labDial connects to addr (IPv4 host:port) inside the lab's namespace.
func labDial(lab *Lab, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host).To4()
	p, err := strconv.Atoi(port)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("%q is not an IPv4 address and port", addr)
	}
	fd, err := lab.socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: p}
	copy(sa.Addr[:], ip)
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "lab-console")
	defer f.Close()
	return net.FileConn(f)
}

// labHTTPClient is an HTTP client whose connections are made from inside
// the lab's namespace, where ironflow's services listen.
func labHTTPClient(lab *Lab) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := labDial(lab, addr)
		if err != nil {
			return nil, fmt.Errorf("lab HTTP client: %w", err)
		}
		return c, nil
	}
	return &http.Client{Timeout: labHTTPTimeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// labGet fetches url from inside the lab with the given headers
// (name, value pairs) and returns the status code and body.
func labGet(t *testing.T, lab *Lab, url string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := labHTTPClient(lab).Do(req)
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
