package apiserver

import "testing"

// Ironic masks a dictionary key that contains any of strutils' secret names
// (not only one that ends in one), and "password=" inside a string.
func TestMaskSecretsFollowsIronicsRules(t *testing.T) {
	in := map[string]any{
		"secret_id": "s1", "disk_passphrase": "p", "private_key_file": "k", "admin_pass": "a",
		"root_password_hash": "$6$x", "ipmi_kg_key": "g", "redfish_password": "pw",
		"kernel_append_params": "console=ttyS0 password=hunter2 ip=dhcp",
		"conn":                 `{"user": "u", "password": "hunter3"}`,
		"redfish_username":     "admin", "redfish_address": "https://10.0.0.1", "deploy_kernel": "http://x/k",
	}
	out := maskSecrets(in, scopeDriverInfo)
	for _, k := range []string{"secret_id", "disk_passphrase", "private_key_file", "admin_pass", "root_password_hash", "ipmi_kg_key", "redfish_password"} {
		if out[k] != masked {
			t.Errorf("%s shown as %v", k, out[k])
		}
	}
	if got := out["kernel_append_params"]; got != "console=ttyS0 password=****** ip=dhcp" {
		t.Errorf("kernel_append_params = %v", got)
	}
	if got := out["conn"]; got != `{"user": "u", "password": "******"}` {
		t.Errorf("conn = %v", got)
	}
	for _, k := range []string{"redfish_username", "redfish_address", "deploy_kernel"} {
		if out[k] != in[k] {
			t.Errorf("%s masked: %v", k, out[k])
		}
	}
}

// The prefilter before the secret-in-text expression changes no answer:
// masking with it is masking with the expression alone, for ASCII in any
// case, for Unicode that folds into a secret's name, and for the strings a
// node's fields hold.
func TestMaskPasswordPrefilterKeepsTheExpressionsAnswers(t *testing.T) {
	for _, s := range []string{
		"", "http://127.0.0.1/k", "127.0.0.1", "x86_64", "console=ttyS0 password=hunter2 ip=dhcp",
		"PASSWORD=x", "Api_Key: abc", `{"user": "u", "password": "hunter3"}`, "passwordless", "token",
		"my_token=1", "paſſword=x", "\u212Aeystonekey=v", "sslkey : v", "secret\t=\tv", "a:b=c",
	} {
		if got, want := maskPassword(s), maskPasswordByExpression(s); got != want {
			t.Errorf("maskPassword(%q) = %q, the expression alone %q", s, got, want)
		}
	}
	if maskPassword("paſſword=x") == "paſſword=x" {
		t.Error("a name that folds into password under Unicode case folding is not masked: the test proves nothing")
	}
}

func FuzzMaskPasswordPrefilter(f *testing.F) {
	for _, s := range []string{"password=x", "PaSsWoRd: y", "http://h/k", "paſſword=x", "secret_key='v'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := maskPassword(s), maskPasswordByExpression(s); got != want {
			t.Fatalf("maskPassword(%q) = %q, the expression alone %q", s, got, want)
		}
	})
}

// maskPasswordByExpression is maskPassword without its prefilter.
func maskPasswordByExpression(s string) string {
	if !passwordInText.MatchString(s) {
		return s
	}
	return passwordInText.ReplaceAllString(s, "${1}"+masked)
}
