package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildConfigDrive writes an OpenStack config drive ISO (label config-2,
// openstack/latest/meta_data.json) at path with xorriso, independently of
// ironflow's own config drive code, so that the test image is proven
// against a drive ironflow did not make.
func BuildConfigDrive(path string, metaData map[string]any) error {
	src, err := os.MkdirTemp(filepath.Dir(path), "configdrive-")
	if err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	defer os.RemoveAll(src)
	md, err := json.Marshal(metaData)
	if err != nil {
		return fmt.Errorf("config drive meta_data: %w", err)
	}
	dir := filepath.Join(src, "openstack", "latest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta_data.json"), md, 0o644); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	out, err := exec.Command("xorriso", "-as", "mkisofs", "-quiet", "-o", path, "-V", "config-2", "-J", "-r", src).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build config drive ISO with xorriso: %w: %s", err, out)
	}
	return nil
}
