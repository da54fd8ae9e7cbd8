package kmod

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Loader loads modules from one modules directory.
type Loader struct {
	Dir    string // /lib/modules/<version>
	Index  *Index
	Log    *slog.Logger
	loaded map[string]bool
}

// NewLoader reads Dir's index.
func NewLoader(dir string, log *slog.Logger) (*Loader, error) {
	ix, err := Load(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	return &Loader{Dir: dir, Index: ix, Log: log, loaded: map[string]bool{}}, nil
}

// Load loads the named modules and their dependencies; a module the kernel
// already has (built in or loaded) is fine.
func (l *Loader) Load(names ...string) error {
	order, err := l.Index.Closure(names...)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range order {
		if l.loaded[n] {
			continue
		}
		l.loaded[n] = true
		if err := l.insert(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Loader) insert(name string) error {
	m := l.Index.Modules[name]
	f, err := os.Open(filepath.Join(l.Dir, m.Path))
	if err != nil {
		return fmt.Errorf("open module %s: %w", name, err)
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	switch {
	case err == nil:
		l.Log.Debug("loaded kernel module", "module", name)
	case errors.Is(err, unix.EEXIST):
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		// No hardware for it after all (e.g. ipmi_si without a BMC).
		l.Log.Debug("kernel module found no device", "module", name)
	default:
		return fmt.Errorf("load module %s: %w", name, err)
	}
	return nil
}

// LoadForDevices loads the modules matching the modalias of every device
// under sysRoot/bus, repeating while new modules appear (a PCI driver
// creates virtio devices whose drivers are modules too). It returns the
// modules loaded.
func (l *Loader) LoadForDevices(sysRoot string, rounds int) ([]string, error) {
	var all []string
	var errs []error
	seenAlias := map[string]bool{}
	for range rounds {
		var want []string
		paths, _ := filepath.Glob(filepath.Join(sysRoot, "bus", "*", "devices", "*", "modalias"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			alias := strings.TrimSpace(string(b))
			if alias == "" || seenAlias[alias] {
				continue
			}
			seenAlias[alias] = true
			for _, n := range l.Index.Match(alias) {
				if !l.loaded[n] {
					want = append(want, n)
				}
			}
		}
		if len(want) == 0 {
			break
		}
		if err := l.Load(want...); err != nil {
			errs = append(errs, err)
		}
		all = append(all, want...)
	}
	return all, errors.Join(errs...)
}
