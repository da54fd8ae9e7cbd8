package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/serialline"
	"github.com/ironflow/ironflow/store"
)

// TestConsoleWithTwoWorkersAndTwoAPIs runs a console the way a production
// installation splits ironflow (docs/console.md, "Two workers and a split
// API"): two workers of one conductor group, two API processes.
//
//   - With the lab's worker down, the second worker (w2) is the only one
//     that can take the enable: it holds the console (console_holder w2,
//     the endpoint its listener).
//   - The lab's worker starts again and restores only its own consoles: it
//     leaves w2's alone while w2 is alive.
//   - The second API serves the page whose token the first one handed out:
//     the address is read from the node, so the websocket reaches w2's
//     listener and carries the machine's serial text both ways.
//   - A disable sent through the first API runs on w2's own console queue:
//     the browser's session is closed and w2's listener gone before
//     `console show` says disabled.
func TestConsoleWithTwoWorkersAndTwoAPIs(t *testing.T) {
	for _, bin := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: make test installs it (scripts/install-deps.sh)", bin)
		}
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	api2 := fmt.Sprintf("http://127.0.0.1:%d", port)
	a2, err := lab.Spawn("ironflow-api-console2", lab.APIArgs(strings.TrimPrefix(api2, "http://")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Kill)
	w2, err := lab.Spawn("ironflow-worker-console2", append(lab.WorkerArgs(), "--conductor-hostname", "console-w2", "--sync-power-state-interval", "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w2.Stop(5 * time.Second) })
	if err := lab.WaitHTTP(context.Background(), api2+"/", a2); err != nil {
		t.Fatal(err)
	}
	conductorSince := func(name string, since time.Time) bool {
		var c struct {
			Alive     bool   `json:"alive"`
			UpdatedAt string `json:"updated_at"`
		}
		code, _ := call(t, "GET", "/v1/conductors/"+name, nil, &c)
		at, err := time.Parse(time.RFC3339, c.UpdatedAt)
		return code == 200 && c.Alive && err == nil && !at.Before(since.Truncate(time.Second))
	}
	waitFor(t, "the second worker listed as a conductor", 60*time.Second, func() bool { return conductorSince("console-w2", time.Time{}) })

	bmcPort := serialline.BMC(t, "ironflow-agent: looking up the node\r\n")
	mustCLI(t, "node", "create", "--name", "con2-ipmi", "--driver", "ipmi", "--console-interface", "ipmitool-shellinabox",
		"--driver-info", "ipmi_address=127.0.0.1", "--driver-info", "ipmi_port="+strconv.Itoa(bmcPort),
		"--driver-info", "ipmi_username=admin", "--driver-info", "ipmi_password=password")
	defer mustCLI(t, "node", "delete", "con2-ipmi")
	uuid := getNode(t, "con2-ipmi").UUID
	st := openStore(t)
	holder := func() (string, string) {
		n, err := st.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := n.DriverInternalInfo[store.KeyConsoleHolder].(string)
		a, _ := n.DriverInternalInfo[store.KeyConsoleAddress].(string)
		return h, a
	}

	// Only w2 runs: it takes the enable.
	lab.KillWorker()
	workerUp := false
	t.Cleanup(func() {
		if !workerUp {
			if err := lab.StartWorker(); err != nil {
				t.Errorf("start the lab's worker again: %v", err)
			}
		}
	})
	mustCLI(t, "node", "console", "enable", "con2-ipmi")
	var page string
	waitFor(t, "web console of con2-ipmi", 90*time.Second, func() bool {
		c := showConsole(t, "con2-ipmi")
		if c.Enabled && c.Info != nil && c.Info.Type == "shellinabox" {
			page = c.Info.URL
		}
		return page != ""
	})
	h, addr := holder()
	if h != "console-w2" || addr == "" {
		t.Fatalf("console_holder %q, console_address %q: want the second worker's endpoint", h, addr)
	}

	// The lab's worker starts again; w2 is alive, so the console stays
	// w2's. Announce follows the start-up restore: a fresh heartbeat of
	// the restarted worker says its restore is done.
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	workerUp = true
	waitFor(t, "the lab's worker announced again", 60*time.Second, func() bool { return conductorSince(host, restarted) })
	if h2, addr2 := holder(); h2 != "console-w2" || addr2 != addr {
		t.Fatalf("after the lab's worker restarted: console_holder %q at %q; want console-w2 at %q (a live holder keeps its console)", h2, addr2, addr)
	}

	// The second API serves the page the first one handed out.
	if !strings.HasPrefix(page, lab.APIURL+"/console/terminal?token=") {
		t.Fatalf("console_info url %q is not the API's terminal page", page)
	}
	page2 := api2 + strings.TrimPrefix(page, lab.APIURL)
	resp, err := http.Get(page2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the terminal page through the second API: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(strings.Replace(page2, "/console/terminal?", "/console/terminal/ws?", 1), "http")
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatalf("terminal websocket through the second API: %v", err)
	}
	wsExpect(t, ctx, ws, "looking up the node")
	if err := ws.Write(ctx, websocket.MessageText, []byte("typed through the second api\r")); err != nil {
		t.Fatal(err)
	}
	wsExpect(t, ctx, ws, "TYPED THROUGH THE SECOND API")

	// The disable goes through the first API and reaches w2.
	disableWebSeesCloseFirst(t, ctx, "con2-ipmi", ws)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("w2's endpoint %s still listens after the disable", addr)
	}
	if hist := mustCLI(t, "node", "history", "list", "con2-ipmi", "-f", "value", "-c", "Description of the event"); !strings.Contains(hist, "console-w2") {
		t.Errorf("the node's history does not name the holder console-w2:\n%s", hist)
	}
}
