package apiserver

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// Before any lookup a node has no agent token: inspection data sent then is
// forged as far as the API can tell, and is refused unless the operator
// opted out with InspectionWithoutToken.
func TestContinueInspectionNeedsTheLookupToken(t *testing.T) {
	forged := map[string]any{"inventory": map[string]any{
		"interfaces": []any{map[string]any{"name": "eth0", "mac_address": "52:54:01:00:3a:95"}},
		"cpu":        map[string]any{"count": 9999},
	}}
	for _, optOut := range []bool{false, true} {
		e := newEnv(t, func(c *Config) { c.InspectionWithoutToken = optOut })
		uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "it"})["uuid"].(string)
		e.do("POST", "/v1/ports", "1.78", map[string]any{"node_uuid": uuid, "address": "52:54:01:00:3a:95"})
		e.setState(uuid, "inspect wait")
		r := e.do("POST", "/v1/continue_inspection", "1.1", forged)
		_, err := e.st.GetInventory(context.Background(), uuid)
		if !optOut {
			if r.status != 400 || r.faultstring(t) != "Invalid or missing agent token received." {
				t.Errorf("no lookup, no token: %d %s", r.status, r.body)
			}
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("forged inventory stored: %v", err)
			}
			continue
		}
		if r.status != 202 || err != nil {
			t.Errorf("opted out: %d %s, inventory %v", r.status, r.body, err)
		}
	}
}
