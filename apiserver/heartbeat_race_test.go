package apiserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Twenty first heartbeats racing from twenty callback URLs: exactly one is
// accepted and its URL is the one stored; the others get Ironic's
// "Detected change" refusal.
func TestCallbackURLChangeCheckIsAtomic(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "race"})["uuid"].(string)
	e.setState(uuid, "deploy wait")
	if err := e.st.MergeDriverInternalInfo(context.Background(), uuid, map[string]any{keyAgentToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	status := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status[i] = e.do("POST", "/v1/heartbeat/"+uuid, "1.78", map[string]any{
				"callback_url": fmt.Sprintf("http://127.0.0.%d:9999", i+1), "agent_token": "tok", "agent_version": "9.4.0"}).status
		}()
	}
	wg.Wait()
	accepted := -1
	for i, s := range status {
		switch s {
		case 202:
			if accepted >= 0 {
				t.Errorf("two callback URLs accepted: %d and %d", accepted+1, i+1)
			}
			accepted = i
		case 400:
		default:
			t.Errorf("heartbeat %d: %d", i+1, s)
		}
	}
	if accepted < 0 {
		t.Fatalf("no heartbeat accepted: %v", status)
	}
	if got := e.node(uuid).DriverInternalInfo[keyAgentURL]; got != fmt.Sprintf("http://127.0.0.%d:9999", accepted+1) {
		t.Errorf("stored agent_url %v, accepted heartbeat %d", got, accepted+1)
	}
}
