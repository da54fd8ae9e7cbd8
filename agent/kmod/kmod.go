// Package kmod is how ironflow's ramdisk loads kernel modules without
// udev, kmod tools or modules.dep: at build time an Index (aliases and
// dependencies read from each module's .modinfo section) is written beside
// the modules; at boot the agent matches the modalias of every device in
// /sys against it and loads what matches, dependencies first, with
// finit_module.
package kmod

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
)

// IndexFile is the index's name inside /lib/modules/<version>/.
const IndexFile = "modules.ironflow.json"

// Module is one module in the index.
type Module struct {
	// Path is relative to /lib/modules/<version>/.
	Path    string   `json:"path"`
	Depends []string `json:"depends,omitempty"`
	Aliases []string `json:"aliases,omitempty"`
}

// Index maps module names (as modinfo prints them, with underscores) to
// their files, dependencies and device aliases.
type Index struct {
	Version string             `json:"version"`
	Modules map[string]*Module `json:"modules"`
}

// Normalize turns a module name into its canonical form: the kernel treats
// '-' and '_' alike in module names.
func Normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// ModInfo reads the .modinfo section of a .ko file: name, depends, alias.
func ModInfo(file string) (name string, depends, aliases []string, err error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", nil, nil, fmt.Errorf("open module %s: %w", file, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return "", nil, nil, fmt.Errorf("module %s has no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return "", nil, nil, fmt.Errorf("read .modinfo of %s: %w", file, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			name = v
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d != "" {
					depends = append(depends, Normalize(d))
				}
			}
		case "alias":
			aliases = append(aliases, v)
		}
	}
	if name == "" {
		name = strings.TrimSuffix(path.Base(file), ".ko")
	}
	return Normalize(name), depends, aliases, nil
}

// Closure returns names and all their dependencies, dependencies first.
func (ix *Index) Closure(names ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var visit func(n string, stack []string) error
	visit = func(n string, stack []string) error {
		n = Normalize(n)
		if seen[n] {
			return nil
		}
		m, ok := ix.Modules[n]
		if !ok {
			return fmt.Errorf("module %s (needed by %s) is not in the index", n, strings.Join(stack, " <- "))
		}
		seen[n] = true
		for _, d := range m.Depends {
			if err := visit(d, append(stack, n)); err != nil {
				return err
			}
		}
		out = append(out, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Match returns the modules whose aliases match a device's modalias, sorted.
func (ix *Index) Match(modalias string) []string {
	var out []string
	for name, m := range ix.Modules {
		for _, a := range m.Aliases {
			// Aliases are fnmatch patterns (*, ?, [..]); modaliases hold no
			// '/', so path.Match's special '/' does not matter.
			if ok, _ := path.Match(a, modalias); ok {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Load reads an index file.
func Load(file string) (*Index, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read module index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("decode module index %s: %w", file, err)
	}
	return &ix, nil
}

// Marshal encodes the index deterministically (sorted keys and aliases).
func (ix *Index) Marshal() ([]byte, error) {
	for _, m := range ix.Modules {
		sort.Strings(m.Aliases)
		sort.Strings(m.Depends)
	}
	return json.MarshalIndent(ix, "", " ")
}
