// Package npmtool installs the Node.js helpers of Quiver's tests (the
// LanceDB probe, the status page's browser test) from their pinned
// package.json and package-lock.json, outside the repository, and runs
// them.
//
// A helper's files are written to $GOCACHE/../<name>/<hash of the
// lockfile> and installed there with `npm ci` (so a changed lockfile
// installs afresh), once: later runs reuse the folder.
package npmtool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNoNode reports that node or npm is not installed.
var ErrNoNode = errors.New("npmtool: Node >= 20 and npm are needed and not installed")

// Quiet are the npm flags of every install: no optional dependencies, no
// install scripts (they may download binaries), no audit or funding calls.
var Quiet = []string{"--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"}

// installedStamp is written once an install has completed.
const installedStamp = ".installed"

// Install writes the files at the root of files (package.json,
// package-lock.json and the scripts) into the helper folder of name,
// runs `npm ci` there and then `npm <extra[i]...>` for each extra
// command, unless an earlier install completed, and returns the folder.
// It returns ErrNoNode when node or npm are missing. Processes installing
// the same helper at once take turns.
func Install(files fs.FS, name string, extra ...[]string) (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", ErrNoNode
		}
	}
	lockfile, err := fs.ReadFile(files, "package-lock.json")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	sum := sha256.Sum256(lockfile)
	dir := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), name, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages install at once (go test runs
	// them in parallel): one at a time, and files replaced atomically so
	// that a running helper never reads half a script.
	lk, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lk.Close()
	if err := syscall.Flock(int(lk.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock the helper folder: %w", err)
	}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			return "", err
		}
		if err := replaceFile(filepath.Join(dir, e.Name()), b); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, installedStamp)); err == nil {
		return dir, nil
	}
	for _, args := range append([][]string{append([]string{"ci"}, Quiet...)}, extra...) {
		cmd := exec.Command("npm", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := replaceFile(filepath.Join(dir, installedStamp), []byte("ok\n")); err != nil {
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

// Node runs `node script args...` in the installed folder dir and returns
// its combined output.
func Node(dir, script string, args ...string) (string, error) {
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
