// Package npmdir installs a pinned set of npm packages for tests (a
// package.json and its package-lock.json, embedded by the caller) into a
// cache folder outside the repository: <user cache dir>/<name>/<hash of
// the lockfile>, with `npm ci`, so that a changed lockfile installs afresh
// and an unchanged one costs nothing after the first time.
//
// Folder and Installed run nothing, so that code which only uses an
// installed set (the LanceDB probe in the benchmarks) finds it without
// installing.
//
// Test binaries of several packages may install at once (go test runs
// them in parallel): an install holds a file lock on its folder, and files
// are replaced atomically so that a running script never reads half of one.
package npmdir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Quiet are the flags of every npm command Install runs: no optional
// packages (their install scripts may download binaries), no scripts, no
// audit.
var Quiet = []string{"--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"}

// Spec is one package set.
type Spec struct {
	// Name is the cache folder's name, e.g. "quiver-lance-probe".
	Name string
	// Files holds package.json, package-lock.json and any other files the
	// folder needs, at its root.
	Files fs.FS
	// Extra are npm commands (arguments after "npm", Quiet appended) run
	// after `npm ci`, e.g. to install one optional package at its locked
	// version.
	Extra [][]string
}

// Installed is the file written into a folder once an install has
// completed.
const Installed = ".installed"

// Folder returns the folder a package set named name with that lockfile
// is (or is to be) installed in.
func Folder(name string, lockfile []byte) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("npmdir: %w", err)
	}
	sum := sha256.Sum256(lockfile)
	return filepath.Join(cache, name, hex.EncodeToString(sum[:8])), nil
}

// Install installs s unless it already is, and returns its folder. It
// needs node and npm on PATH; callers check for them first to tell a
// missing tool from a failed install.
func Install(s Spec) (string, error) {
	lockfile, err := fs.ReadFile(s.Files, "package-lock.json")
	if err != nil {
		return "", err
	}
	dir, err := Folder(s.Name, lockfile)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lk, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lk.Close()
	if err := syscall.Flock(int(lk.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", dir, err)
	}
	err = fs.WalkDir(s.Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(s.Files, name)
		if err != nil {
			return err
		}
		return replaceFile(filepath.Join(dir, filepath.FromSlash(name)), b)
	})
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, Installed)); err == nil {
		return dir, nil
	}
	for _, args := range append([][]string{{"ci"}}, s.Extra...) {
		args = append(args[:len(args):len(args)], Quiet...)
		cmd := exec.Command("npm", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := replaceFile(filepath.Join(dir, Installed), lockfile); err != nil {
		return "", err
	}
	return dir, nil
}

// replaceFile gives path the contents b, atomically, unless it has them.
func replaceFile(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
