package ramdisk

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ironflow/ironflow/agent"
)

// stepName is what the agent accepts as a custom step's file name
// (agent.CustomStepsFromDir).
var stepName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// customStepFiles reads a directory of custom deploy steps for the
// ramdisk: each step at agent.DefaultCustomStepsDir/<name>, and what it
// needs to run there. It answers the files by their path in the ramdisk
// and those that must be executable. A file that is not executable or not
// named as a step, a script whose interpreter the build host lacks, and a
// program the ramdisk cannot load are refused: the agent would skip or
// fail the step at deploy time.
func customStepFiles(dir string) (map[string][]byte, map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("custom deploy steps: %w", err)
	}
	files, execs := map[string][]byte{}, map[string]bool{}
	addProgram := func(host, at string) error {
		deps, err := dynamicBinary(host)
		if err != nil {
			return err
		}
		body := deps[strings.TrimPrefix(host, "/")]
		delete(deps, strings.TrimPrefix(host, "/"))
		for n, b := range deps {
			files[n] = b
			if strings.HasPrefix(path.Base(n), "ld-linux") {
				execs[n] = true
			}
		}
		at = strings.TrimPrefix(at, "/")
		files[at], execs[at] = body, true
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		file := filepath.Join(dir, name)
		info, err := os.Stat(file)
		if err != nil {
			return nil, nil, fmt.Errorf("custom deploy step %s: %w", file, err)
		}
		if info.IsDir() {
			continue
		}
		if !stepName.MatchString(name) {
			return nil, nil, fmt.Errorf("custom deploy step %s: a step's file is named as a step (letters, digits, _)", file)
		}
		if info.Mode().Perm()&0o111 == 0 {
			return nil, nil, fmt.Errorf("custom deploy step %s is not executable (chmod +x)", file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, err
		}
		at := path.Join(agent.DefaultCustomStepsDir, name)
		if bytes.HasPrefix(b, []byte("#!")) {
			interp := interpreterOf(b)
			if interp == "" {
				return nil, nil, fmt.Errorf("custom deploy step %s: its #! line names no interpreter", file)
			}
			if err := addProgram(interp, interp); err != nil {
				return nil, nil, fmt.Errorf("custom deploy step %s: its interpreter %s: %w", file, interp, err)
			}
			files[strings.TrimPrefix(at, "/")], execs[strings.TrimPrefix(at, "/")] = b, true
			continue
		}
		if _, err := elf.NewFile(bytes.NewReader(b)); err != nil {
			return nil, nil, fmt.Errorf("custom deploy step %s is neither a program nor a #! script", file)
		}
		if err := addProgram(file, at); err != nil {
			return nil, nil, fmt.Errorf("custom deploy step %s: %w", file, err)
		}
	}
	return files, execs, nil
}

// interpreterOf is the program a "#!" line names (its first word).
func interpreterOf(script []byte) string {
	line, _, _ := bytes.Cut(script[2:], []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
