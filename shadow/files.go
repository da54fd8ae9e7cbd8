package shadow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// User is a login account as /etc/passwd describes it.
type User struct {
	Name     string
	UID, GID int
	Home     string
	Shell    string
}

// SetUser makes u a user of the system whose root directory is root ("/"
// for the running one) with the password whose crypt hash is hash: its
// /etc/passwd, /etc/group and /etc/shadow entries are created or replaced,
// other entries are kept.
func SetUser(root string, u User, hash string) error {
	if u.Name == "" || strings.ContainsAny(u.Name, ":\n") {
		return fmt.Errorf("shadow: bad user name %q", u.Name)
	}
	if !IsHash(hash) {
		return errors.New("shadow: the password is not a SHA-512 crypt hash")
	}
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("shadow: %w", err)
	}
	days := time.Now().Unix() / 86400
	entries := []struct {
		file string
		mode fs.FileMode
		line string
	}{
		{"passwd", 0o644, fmt.Sprintf("%s:x:%d:%d:%s:%s:%s", u.Name, u.UID, u.GID, u.Name, u.Home, u.Shell)},
		{"group", 0o644, fmt.Sprintf("%s:x:%d:", u.Name, u.GID)},
		{"shadow", 0o600, fmt.Sprintf("%s:%s:%d:0:99999:7:::", u.Name, hash, days)},
	}
	for _, e := range entries {
		if err := setEntry(filepath.Join(etc, e.file), e.mode, u.Name, e.line); err != nil {
			return err
		}
	}
	return nil
}

// Entry returns the line of /etc/<file> under root for user name.
func Entry(root, file, name string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(root, "etc", file))
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, name+":") {
			return l, true
		}
	}
	return "", false
}

// setEntry replaces name's line of path (or appends it), writing the file
// anew and renaming it into place so that a crash leaves the old one.
func setEntry(path string, mode fs.FileMode, name, line string) error {
	var keep []string
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("shadow: %w", err)
	}
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, name+":") {
			keep = append(keep, l)
		}
	}
	keep = append(keep, line)
	tmp := path + ".ironflow"
	if err := os.WriteFile(tmp, []byte(strings.Join(keep, "\n")+"\n"), mode); err != nil {
		return fmt.Errorf("shadow: %w", err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("shadow: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("shadow: %w", err)
	}
	return nil
}
