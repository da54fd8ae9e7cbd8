package metal3

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// imageServer serves one random whole-disk image (wholeDiskImage) on
// loopback, as tests/'s imageServer does.
type imageServer struct {
	*httptest.Server
	sha256 string
}

// wholeDiskImage is size random bytes behind an MBR with an EFI system
// partition from 1 MiB (a UEFI host's bootloader step needs one: BMO sets
// boot_mode:uefi) and a Linux partition after it to the image's end, so
// that the agent adds the config drive partition after the image.
func wholeDiskImage(size int) []byte {
	data := make([]byte, size)
	_, _ = rand.Read(data[1<<20:])
	esp, root := data[446:462], data[462:478]
	esp[4] = 0xef
	binary.LittleEndian.PutUint32(esp[8:], 2048)
	binary.LittleEndian.PutUint32(esp[12:], 4096)
	root[4] = 0x83
	binary.LittleEndian.PutUint32(root[8:], 6144)
	binary.LittleEndian.PutUint32(root[12:], uint32(size/512-6144))
	data[510], data[511] = 0x55, 0xaa
	return data
}

func newImageServer(t *testing.T, size int) *imageServer {
	t.Helper()
	data := wholeDiskImage(size)
	sum := sha256.Sum256(data)
	s := &imageServer{sha256: hex.EncodeToString(sum[:])}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "disk.raw", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

// operatorPatch changes a node as the operator of the Ironic BMO talks to
// would, outside BMO's calls (not recorded).
func operatorPatch(t *testing.T, uuid string, ops ...map[string]any) {
	t.Helper()
	b, _ := json.Marshal(ops)
	req, _ := http.NewRequest("PATCH", stack.APIURL+"/v1/nodes/"+uuid, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.81")
	req.SetBasicAuth(apiUser, apiPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("operator PATCH of node %s: %s", uuid, resp.Status)
	}
}

// operatorGet reads a node as an operator would, outside BMO's calls.
func operatorGet(t *testing.T, uuid string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", stack.APIURL+"/v1/nodes/"+uuid, nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.81")
	req.SetBasicAuth(apiUser, apiPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || resp.StatusCode != 200 {
		t.Fatalf("operator GET of node %s: %s, %v", uuid, resp.Status, err)
	}
	return n
}
