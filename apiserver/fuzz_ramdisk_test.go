package apiserver

import (
	"net/url"
	"testing"
)

// FuzzLookupQuery: whatever an agent (or anyone) puts in the lookup's
// addresses and node_uuid, the answer is never a server error.
func FuzzLookupQuery(f *testing.F) {
	for _, s := range [][2]string{
		{"52:54:01:00:3a:96", ""},
		{"52:54:01:00:3a:96,00:11:22:33:44:55", ""},
		{"", "not-a-uuid"},
		{"zz,yy", ""},
		{"52-54-01-00-3A-96", "00000000-0000-0000-0000-000000000000"},
		{",,,", ""},
		{"", ""},
	} {
		f.Add(s[0], s[1], "1.78")
	}
	f.Add("52:54:01:00:3a:96", "", "1.22")
	e := newEnv(f)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "lk"})["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:01:00:3a:96", "node_uuid": uuid}); r.status != 201 {
		f.Fatalf("port: %d", r.status)
	}
	e.setState(uuid, "wait call-back")
	f.Fuzz(func(t *testing.T, addresses, nodeUUID, version string) {
		q := url.Values{}
		if addresses != "" {
			q.Set("addresses", addresses)
		}
		if nodeUUID != "" {
			q.Set("node_uuid", nodeUUID)
		}
		noServerError(t, e.serve("GET", "/v1/lookup?"+q.Encode(), version, nil), []byte(q.Encode()))
	})
}

// FuzzContinueInspectionBody: an inventory body of any shape is refused
// clearly or stored, never a server error.
func FuzzContinueInspectionBody(f *testing.F) {
	for _, s := range []string{
		`{"inventory":{"interfaces":[{"name":"eth0","mac_address":"52:54:01:00:3A:97"}],"memory":{"physical_mb":1024}},"agent_token":"tok"}`,
		`{"inventory":{"interfaces":[{"mac_address":5}]},"agent_token":"tok"}`,
		`{"inventory":[],"agent_token":"tok"}`,
		`{"inventory":{"interfaces":"eth0"}}`,
		`{"plugin_data":{"x":1},"agent_token":"tok"}`,
		`{}`, `[]`, ``, `null`, `{"inventory":null}`,
	} {
		f.Add([]byte(s), "1.1")
	}
	e := newEnv(f)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "ci"})["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:01:00:3a:97", "node_uuid": uuid}); r.status != 201 {
		f.Fatalf("port: %d", r.status)
	}
	e.setState(uuid, "inspect wait")
	if err := e.st.MergeDriverInternalInfo(f.Context(), uuid, map[string]any{"agent_secret_token": "tok"}); err != nil {
		f.Fatal(err)
	}
	e.eng.hold(uuid, true)
	f.Fuzz(func(t *testing.T, body []byte, version string) {
		noServerError(t, e.serve("POST", "/v1/continue_inspection", version, body), body)
	})
}
