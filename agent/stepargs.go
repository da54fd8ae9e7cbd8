package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// stepArgsInfo is each step's argsinfo, as get_clean_steps and
// get_service_steps advertise it: the step engine validates a user's args
// against it. The erase options keep the names of IPA's [DEFAULT] options
// (enable_ata_secure_erase, enable_nvme_secure_erase,
// shred_random_overwrite_iterations, shred_final_overwrite_with_zeros);
// the burn-in durations keep the names of IPA's driver_info knobs without
// their agent_burnin_<tool>_ prefix (timeout for stress-ng's CPU and VM
// stressors, runtime and loops for fio), since ironflow runs neither tool.
func stepArgsInfo(step string) map[string]any {
	arg := func(desc string) map[string]any { return map[string]any{"description": desc, "required": false} }
	erase := map[string]any{
		"enable_ata_secure_erase":           arg("use ATA Security Erase Unit where the drive supports it and is not frozen (default true)"),
		"enable_nvme_secure_erase":          arg("use NVMe Format with Secure Erase where the controller supports it (default true)"),
		"continue_if_secure_erase_failed":   arg("fall back to shredding a disk whose secure erase failed instead of failing the step (default false)"),
		"shred_random_overwrite_iterations": arg("random passes over a disk that has no secure erase (default 1)"),
		"shred_final_overwrite_with_zeros":  arg("a final pass of zeros after the random ones (default true)"),
	}
	checkpoint := arg("the progress.checkpoint object an interrupted run of this step published: the step resumes from it")
	switch step {
	case "erase_devices":
		return erase
	case "erase_devices_express":
		return map[string]any{"enable_nvme_secure_erase": erase["enable_nvme_secure_erase"]}
	case "clean_uefi_nvram":
		return map[string]any{"match_patterns": map[string]any{
			"description": "regular expressions (a list, or one string) matched against each UEFI boot entry's description and device path; matching entries are removed from NVRAM and BootOrder. Default: \"(?i)^(ironflow|ironic|ipa)\"",
			"required":    false,
		}}
	case "burnin_cpu":
		return map[string]any{"timeout": arg("seconds to load every CPU (default 86400, IPA's agent_burnin_cpu_timeout)"), "checkpoint": checkpoint}
	case "burnin_memory":
		return map[string]any{
			"timeout":    arg("seconds to write and verify memory patterns (default 86400, IPA's agent_burnin_vm_timeout)"),
			"vm_bytes":   arg("memory to test: a percentage of the available memory (\"50%\") or a size (\"512M\", bytes); at most 90% of what is available (default 50%)"),
			"checkpoint": checkpoint,
		}
	case "burnin_disk":
		return map[string]any{
			"runtime": arg("seconds of write/verify passes over every disk; 0 runs loops passes (IPA's agent_burnin_fio_disk_runtime)"),
			"loops":   arg("passes over every disk when runtime is 0 (default 4, IPA's agent_burnin_fio_disk_loops)"),
		}
	case "burnin_network":
		return map[string]any{
			"runtime":    arg("seconds of traffic (default 21600, IPA's agent_burnin_fio_network_runtime)"),
			"role":       arg("\"writer\" sends to the partner, \"reader\" listens for it; without a partner the agent talks to itself over loopback"),
			"partner":    arg("the other node's agent host (IP or name); the reader needs none"),
			"port":       arg("TCP port the reader listens on (default 9998)"),
			"checkpoint": checkpoint,
		}
	}
	return nil
}

// stepArgs reads a step's args, with the node's driver_internal_info keys
// Ironic fills from its [deploy] options as the fallback
// (agent_enable_ata_secure_erase ...), then the default.
type stepArgs struct {
	args map[string]any
	dii  map[string]any
	err  error
}

func newStepArgs(args, node map[string]any) *stepArgs {
	dii, _ := node["driver_internal_info"].(map[string]any)
	return &stepArgs{args: args, dii: dii}
}

func (s *stepArgs) lookup(name, iiKey string) (any, bool) {
	if v, ok := s.args[name]; ok && v != nil {
		return v, true
	}
	if iiKey != "" {
		if v, ok := s.dii[iiKey]; ok && v != nil {
			return v, true
		}
	}
	return nil, false
}

func (s *stepArgs) fail(name string, v any, want string) {
	if s.err == nil {
		s.err = newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf("argument %s: %v is not %s", name, v, want))
	}
}

func (s *stepArgs) boolean(name, iiKey string, def bool) bool {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	switch t := v.(type) {
	case bool:
		return t
	case string:
		if b, err := strconv.ParseBool(strings.ToLower(t)); err == nil {
			return b
		}
	}
	s.fail(name, v, "a boolean")
	return def
}

func (s *stepArgs) integer(name, iiKey string, def int64) int64 {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	var n int64
	switch t := v.(type) {
	case float64:
		n = int64(t)
		if float64(n) != t {
			s.fail(name, v, "an integer")
			return def
		}
	case json.Number:
		var err error
		if n, err = t.Int64(); err != nil {
			s.fail(name, v, "an integer")
			return def
		}
	case string:
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(t), 10, 64); err != nil {
			s.fail(name, v, "an integer")
			return def
		}
	case int:
		n = int64(t)
	case int64:
		n = t
	default:
		s.fail(name, v, "an integer")
		return def
	}
	if n < 0 {
		s.fail(name, v, "a non-negative integer")
		return def
	}
	return n
}

func (s *stepArgs) seconds(name, iiKey string, def time.Duration) time.Duration {
	return time.Duration(s.integer(name, iiKey, int64(def/time.Second))) * time.Second
}

func (s *stepArgs) str(name, iiKey, def string) string {
	v, ok := s.lookup(name, iiKey)
	if !ok {
		return def
	}
	t, ok := v.(string)
	if !ok {
		s.fail(name, v, "a string")
		return def
	}
	return t
}

// strings accepts a list of strings or one string.
func (s *stepArgs) strings(name string, def []string) []string {
	v, ok := s.lookup(name, "")
	if !ok {
		return def
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			str, ok := e.(string)
			if !ok {
				s.fail(name, v, "a list of strings")
				return def
			}
			out = append(out, str)
		}
		return out
	case []string:
		return t
	}
	s.fail(name, v, "a list of strings")
	return def
}
