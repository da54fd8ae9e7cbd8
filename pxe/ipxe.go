package pxe

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// DefaultIPXERetryDelaySeconds is how long a node's iPXE script waits before
// fetching kernel and initrd again after a failure.
const DefaultIPXERetryDelaySeconds = 10

// errUnsafeScriptValue: a value that would change the script's structure if
// pasted into it.
var errUnsafeScriptValue = errors.New("unsafe value for an iPXE script")

// RenderIPXEScript renders the iPXE script that boots bc's kernel and
// initrd. A failed fetch or boot loops back after a pause instead of
// dropping the machine to an iPXE shell: a flaky HTTP server costs a retry,
// not a deploy. Values that could break out of their line (control
// characters, iPXE's "||" and "&&" operators) are refused, not escaped.
func RenderIPXEScript(bc BootConfig) (string, error) {
	id, err := uuid.Parse(bc.NodeUUID)
	if err != nil {
		return "", fmt.Errorf("render iPXE script: node UUID %q: %w", bc.NodeUUID, err)
	}
	for _, u := range []struct{ name, v string }{{"kernel", bc.KernelURL}, {"initrd", bc.InitrdURL}} {
		if err := checkScriptURL(u.v); err != nil {
			return "", fmt.Errorf("render iPXE script for node %s: %s URL: %w", id, u.name, err)
		}
	}
	if err := checkScriptWords(bc.KernelParams); err != nil {
		return "", fmt.Errorf("render iPXE script for node %s: kernel parameters: %w", id, err)
	}
	mode := bc.BootMode
	if mode != BootModeUEFI {
		mode = BootModeBIOS
	}
	params := strings.Join(strings.Fields(bc.KernelParams), " ")
	// The EFI stub finds the initrd by the name given to it below; the
	// BIOS loader ignores the parameter. BOOTIF tells the agent which NIC
	// booted, as Ironic's scripts do.
	cmdline := "initrd=initrd"
	if params != "" {
		cmdline += " " + params
	}
	if !strings.Contains(params, "BOOTIF=") {
		cmdline += " BOOTIF=${mac}"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!ipxe\n")
	fmt.Fprintf(&b, "# ironflow: node %s, %s boot (%s)\n", id, mode, safeComment(bc.Kind))
	fmt.Fprintf(&b, ":boot\n")
	fmt.Fprintf(&b, "imgfree\n")
	fmt.Fprintf(&b, "kernel --name kernel %s %s || goto retry\n", bc.KernelURL, cmdline)
	fmt.Fprintf(&b, "initrd --name initrd %s || goto retry\n", bc.InitrdURL)
	fmt.Fprintf(&b, "boot || goto retry\n")
	fmt.Fprintf(&b, ":retry\n")
	fmt.Fprintf(&b, "echo ironflow: booting node %s failed, retrying in %d s\n", id, DefaultIPXERetryDelaySeconds)
	fmt.Fprintf(&b, "sleep %d || goto boot\n", DefaultIPXERetryDelaySeconds)
	fmt.Fprintf(&b, "goto boot\n")
	return b.String(), nil
}

func checkScriptURL(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	if err := checkScriptWords(v); err != nil {
		return err
	}
	if strings.ContainsAny(v, " \t") {
		return fmt.Errorf("%w: contains whitespace", errUnsafeScriptValue)
	}
	u, err := url.Parse(v)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "tftp" {
		return fmt.Errorf("scheme %q: want http, https or tftp", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}

// checkScriptWords refuses what would end a script line or chain a second
// command onto it.
func checkScriptWords(v string) error {
	for _, r := range v {
		if r < 0x20 && r != '\t' || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("%w: control character %q", errUnsafeScriptValue, r)
		}
	}
	// iPXE only treats "||" and "&&" as operators when they stand alone,
	// but refusing them anywhere keeps the rule simple to check.
	for _, op := range []string{"||", "&&"} {
		if strings.Contains(v, op) {
			return fmt.Errorf("%w: iPXE operator %q", errUnsafeScriptValue, op)
		}
	}
	return nil
}

// safeComment keeps a free-form label on its comment line.
func safeComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return -1
		}
		return r
	}, s)
}
