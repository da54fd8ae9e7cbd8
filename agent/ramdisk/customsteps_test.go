package ramdisk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A steps directory as mkramdisk reads it: a #! script brings its
// interpreter and the interpreter's loader and libraries, a program its
// own; every step sits executable under the agent's steps directory. A
// file the agent could not run as a step is refused with its name.
func TestCustomStepFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "say_hello"), []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("SKIP: no /bin/true on the build host")
	}
	if err := os.WriteFile(filepath.Join(dir, "noop"), tr, 0o755); err != nil {
		t.Fatal(err)
	}
	files, execs, err := customStepFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"etc/ironflow-agent/deploy-steps.d/say_hello", "etc/ironflow-agent/deploy-steps.d/noop", "bin/sh"} {
		if files[want] == nil || !execs[want] {
			t.Errorf("%s: carried %v, executable %v", want, files[want] != nil, execs[want])
		}
	}
	var libc, loader bool
	for n := range files {
		libc = libc || strings.Contains(n, "libc.so")
		loader = loader || (strings.Contains(n, "ld-linux") && execs[n])
	}
	if !libc || !loader {
		t.Errorf("the script's interpreter came without libc (%v) or an executable loader (%v): %v", libc, loader, names(files))
	}

	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"not_executable": {"#!/bin/sh\n", 0o644, "not executable"},
		"bad-name":       {"#!/bin/sh\n", 0o755, "named as a step"},
		"plain_text":     {"echo hello\n", 0o755, "neither a program nor a #! script"},
		"no_interpreter": {"#!/no/such/shell\n", 0o755, "its interpreter /no/such/shell"},
	} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, name), []byte(c.body), c.mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := customStepFiles(d); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v; want an error naming the file and saying %q", name, err, c.want)
		}
	}
}

func names(m map[string][]byte) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}
