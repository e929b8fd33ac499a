// Package lanceprobe runs the LanceDB probe (tools/lance-probe/probe.mjs
// of the Quiver workspace, @lancedb/lancedb 0.31.0 = lance 8.0.0) from Go
// tests, to prove that real Lance reads what Quiver writes and the other
// way round.
//
// The probe folder is copied to a cache directory outside the repository
// ($GOCACHE/../quiver-lance-probe) and installed there once with
// `npm run setup:<platform>`; tests skip only when node or npm is missing.
// Set QUIVER_LANCE_PROBE_SRC to use another probe folder.
//
// Beside probe.mjs the cache folder holds quiverprobe.mjs (embedded here):
// Quiver's own LanceDB commands (append, index, create-ipc, merge-insert, dump), kept out of
// the shared workspace.
package lanceprobe

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// defaultSource returns where the shared workspace keeps the probe: the
// folder shared/ beside the module root (as in development and CI).
func defaultSource() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	return filepath.Join(root, "..", "shared", "tools", "lance-probe"), nil
}

// quiverProbe is Quiver's own probe script (see the package doc).
//
//go:embed quiverprobe.mjs
var quiverProbe []byte

// QuiverScript is the file name of quiverProbe in the probe folder.
const QuiverScript = "quiverprobe.mjs"

var (
	setupOnce sync.Once
	setupDir  string
	setupErr  string
)

// ErrNoNode reports that node or npm is not installed.
var ErrNoNode = errors.New("lanceprobe: the LanceDB checks need Node >= 20 and npm, which are not installed")

// Install returns the installed probe directory, installing it on first
// use (once per process; safe for concurrent use). It returns ErrNoNode
// when node or npm are missing.
func Install() (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", ErrNoNode
		}
	}
	setupOnce.Do(install)
	if setupErr != "" {
		return "", errors.New("lanceprobe: " + setupErr)
	}
	return setupDir, nil
}

// Dir returns the installed probe directory, installing it on first use.
// It skips the test when node or npm are missing and fails it when the
// install fails.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Install()
	if errors.Is(err, ErrNoNode) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func install() {
	src := os.Getenv("QUIVER_LANCE_PROBE_SRC")
	if src == "" {
		var err error
		if src, err = defaultSource(); err != nil {
			setupErr = "go env GOMOD: " + err.Error()
			return
		}
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		setupErr = "go env GOCACHE: " + err.Error()
		return
	}
	dir := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "quiver-lance-probe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		setupErr = err.Error()
		return
	}
	// Test binaries of several packages install at once (go test runs
	// them in parallel): one at a time, and files replaced atomically so
	// that a running probe never reads half a package.json.
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		setupErr = err.Error()
		return
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		setupErr = "lock the probe folder: " + err.Error()
		return
	}
	for _, f := range []string{"package.json", "probe.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			setupErr = "read probe source (set QUIVER_LANCE_PROBE_SRC): " + err.Error()
			return
		}
		if err := replaceFile(filepath.Join(dir, f), b); err != nil {
			setupErr = err.Error()
			return
		}
	}
	if err := replaceFile(filepath.Join(dir, QuiverScript), quiverProbe); err != nil {
		setupErr = err.Error()
		return
	}
	setupDir = dir
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err == nil {
		if matches, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@lancedb", "lancedb-*")); len(matches) > 0 {
			return
		}
	}
	platform := map[string]string{"linux/amd64": "linux-x64", "linux/arm64": "linux-arm64", "darwin/arm64": "darwin-arm64"}[runtime.GOOS+"/"+runtime.GOARCH]
	if platform == "" {
		setupErr = "no probe setup script for " + runtime.GOOS + "/" + runtime.GOARCH
		return
	}
	cmd := exec.Command("npm", "run", "setup:"+platform)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		setupErr = "npm run setup:" + platform + ": " + err.Error() + "\n" + string(out)
	}
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

// Run runs `node probe.mjs args...` and returns its output; a non-zero
// exit fails the test with the output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	return runScript(t, "probe.mjs", args)
}

// RunQuiver runs `node quiverprobe.mjs args...` like Run.
func RunQuiver(t testing.TB, args ...string) string {
	t.Helper()
	return runScript(t, QuiverScript, args)
}

func runScript(t testing.TB, script string, args []string) string {
	t.Helper()
	dir := Dir(t)
	out, err := Node(dir, script, args...)
	if err != nil {
		t.Fatalf("node %s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
	return out
}

// Node runs `node script args...` in the installed probe folder dir and
// returns its combined output.
func Node(dir, script string, args ...string) (string, error) {
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// WriteIPC writes recs (borrowed, of schema) to the Arrow IPC file path,
// the input format of quiverprobe.mjs's create-ipc and merge-insert.
func WriteIPC(path string, schema *arrow.Schema, recs []arrow.RecordBatch) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// NodeJSON runs `node script args...` like Node and decodes the last line
// of its output, the JSON answer of quiverprobe.mjs's timed commands,
// into v.
func NodeJSON(dir, script string, v any, args ...string) error {
	out, err := Node(dir, script, args...)
	if err != nil {
		return fmt.Errorf("node %s %s: %w\n%s", script, strings.Join(args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		return fmt.Errorf("node %s %s answered %q: %w", script, strings.Join(args, " "), out, err)
	}
	return nil
}
