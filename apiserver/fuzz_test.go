package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// serve runs one request through the handler in-process.
func (e *env) serve(method, path, version string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set(headerVersion, version)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// noServerError fails on a 5xx: bad input must never look like our fault.
func noServerError(t *testing.T, rec *httptest.ResponseRecorder, input []byte) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d for input %q: %s", rec.Code, input, rec.Body.String())
	}
}

// Seeds are taken from the Ironic trace and from the edge cases of the
// patch rules.
func FuzzNodePatch(f *testing.F) {
	for _, s := range []string{
		`[{"op":"add","path":"/instance_info/image_source","value":"http://127.0.0.1:8080/images/fake.qcow2"},{"op":"add","path":"/instance_info/root_gb","value":10}]`,
		`[{"op":"frobnicate","path":"/extra/a","value":1}]`,
		`[{"op":"replace","path":"/driver","value":"manual-management"}]`,
		`[{"op":"add","path":"/deploy_interface","value":"direct"},{"op":"add","path":"/instance_info/image_checksum","value":"b6d81b360a5672d80c27430f39153e2c"}]`,
		`[{"op":"remove","path":"/extra/a/b/c"}]`,
		`[{"op":"add","path":"/traits/0","value":"CUSTOM_X"}]`,
		`[{"op":"replace","path":"/properties","value":{"cpus":1e400}}]`,
		`[{"op":"add","path":"/extra/x","value":[1,{"a":null}]},{"op":"add","path":"/extra/x/1/b","value":2},{"op":"remove","path":"/extra/x/0"}]`,
		`[{"op":"replace","path":"/name","value":"a"},{"op":"replace","path":"/maintenance","value":"yes"}]`,
		`{}`, `[]`, `null`, `[1]`, `[{"op":"add"}]`, `[{"op":"add","path":"/a~1b","value":1}]`,
	} {
		f.Add([]byte(s))
	}
	e := newEnv(f)
	n := e.createNode(map[string]any{"driver": "fake-hardware", "name": "fz", "extra": map[string]any{"a": map[string]any{"b": 1}}})
	uuid := n["uuid"].(string)
	f.Fuzz(func(t *testing.T, body []byte) {
		noServerError(t, e.serve("PATCH", "/v1/nodes/"+uuid, "1.78", body), body)
		rec := e.serve("GET", "/v1/nodes/"+uuid, "1.78", nil)
		if rec.Code != http.StatusOK && rec.Code != http.StatusNotFound {
			t.Fatalf("node unreadable after patch %q: %d %s", body, rec.Code, rec.Body.String())
		}
	})
}

func FuzzCreateNode(f *testing.F) {
	for _, s := range []string{
		`{"driver":"fake-hardware","properties":{"cpus":4,"memory_mb":8192,"local_gb":100,"cpu_arch":"x86_64"},"name":"anchor-node-14937"}`,
		`{"driver":"no-such-driver","name":"bad-14937"}`,
		`{"driver":"fake-hardware","bogus_field":1}`,
		`{"driver":"ipmi","driver_info":{"ipmi_address":"127.0.0.1","ipmi_password":"x"},"boot_interface":"pxe"}`,
		`{"driver":"redfish","uuid":"174ba35c-6c8d-4fe5-898c-79598b484c4d","conductor_group":"Rack-1"}`,
		`{"driver":"ipmi","name":"\u0000"}`, `{"driver":"ipmi","description":"a\u0000b"}`,
		`{"driver":"ipmi","extra":{"k\u0000":"v\u0000"}}`, `{"driver":"ipmi","owner":"\ud800"}`, `{"driver":1}`, `[]`, `"x"`, `{"driver":"ipmi","maintenance":"maybe"}`,
		`{"driver":"ipmi","description":"` + string(bytes.Repeat([]byte("d"), 5000)) + `"}`,
	} {
		f.Add([]byte(s), "1.78")
	}
	f.Add([]byte(`{"driver":"ipmi","lessee":"p"}`), "1.1")
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, body []byte, version string) {
		noServerError(t, e.serve("POST", "/v1/nodes", version, body), body)
	})
}

func FuzzHeartbeatBody(f *testing.F) {
	for _, s := range []string{
		`{"callback_url":"http://127.0.0.1:9999","agent_version":"9.4.0"}`,
		`{"callback_url":"http://127.0.0.1:9999","agent_version":"9.4.0","agent_token":"wrong"}`,
		`{"callback_url":"http://127.0.0.1:9999","agent_token":"AgKWp0rhwfWQIh1OyHH6W7gMdjis3GX79F38637bZ2M"}`,
		`{"agent_token":"AgKWp0rhwfWQIh1OyHH6W7gMdjis3GX79F38637bZ2M","agent_version":"9.4.0"}`,
		`{"callback_url":"http://127.0.0.1:9999","agent_token":"i6V-bC8d7MV0U4W0bqEph9HOXW7oAO15X7U3SihpWCg","agent_version":"9.4.0","agent_status":"bogus"}`,
		`{"callback_url":"http://127.0.0.2:9999","agent_token":"tok","agent_version":"9.4.0","agent_verify_ca":"x","agent_status":"end","agent_status_message":"m"}`,
		`{"callback_url":"%%%","agent_token":"tok","agent_version":"1"}`, `{"callback_url":5}`, `[]`, ``, `null`,
	} {
		f.Add([]byte(s), "1.78")
	}
	f.Add([]byte(`{"callback_url":"http://127.0.0.1:9999","agent_version":"9.4.0"}`), "1.35")
	e := newEnv(f)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "hb"})["uuid"].(string)
	e.setState(uuid, "wait call-back")
	if err := e.st.MergeDriverInternalInfo(f.Context(), uuid, map[string]any{"agent_secret_token": "tok"}); err != nil {
		f.Fatal(err)
	}
	e.eng.hold(uuid, true)
	f.Fuzz(func(t *testing.T, body []byte, version string) {
		noServerError(t, e.serve("POST", "/v1/heartbeat/"+uuid, version, body), body)
	})
}
