package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
)

// The helper process mode of the test binary: TestMain runs helperProcess
// instead of the tests when helperEnv is set to "<root URI>|<keys>|<id>".
// The emulators' settings reach it through the inherited environment.
const helperEnv = "QUIVER_STORAGE_HELPER"

// raceKey is the i-th key the helpers race for.
func raceKey(i int) string { return fmt.Sprintf("_delta_log/%020d.json", i) }

// helperProcess PutIfAbsents keys 0..n-1 with content "process-<id>". It
// waits for one byte on stdin before each key, so the parent releases all
// helpers into each race at once, and answers W (won) or L (lost).
func helperProcess() int {
	parts := strings.SplitN(os.Getenv(helperEnv), "|", 3)
	n, _ := strconv.Atoi(parts[1])
	ctx := context.Background()
	b, err := Open(ctx, parts[0], Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	release := make([]byte, 1)
	for i := range n {
		if _, err := io.ReadFull(os.Stdin, release); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 2
		}
		outcome := "W"
		if err := b.PutIfAbsent(ctx, raceKey(i), []byte("process-"+parts[2])); errors.Is(err, ErrAlreadyExists) {
			outcome = "L"
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if _, err := os.Stdout.WriteString(outcome); err != nil {
			return 2
		}
	}
	return 0
}

// TestPutIfAbsentRaceProcesses races PutIfAbsent of the same keys from
// several OS processes released into each race at once: for every key
// exactly one process wins and the stored content is the winner's. On
// file:// this is what fileblob's IfNotExist (stat + rename under an
// in-process mutex) gets wrong; on S3, GCS and Azure it is the store's
// conditional write, on its emulator.
func TestPutIfAbsentRaceProcesses(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		raceProcesses(t, "file://"+dir, 100)
		wantNoSideFiles(t, dir)
	})
	for _, e := range emulator.All() {
		t.Run(e.Name, func(t *testing.T) { raceProcesses(t, e.Start(t).Table(t), 20) })
	}
}

// raceProcesses runs the race of TestPutIfAbsentRaceProcesses for keys
// keys under the root uri.
func raceProcesses(t *testing.T, uri string, keys int) {
	const procs = 3
	b := mustOpen(t, uri, Options{})
	type helper struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out io.ReadCloser
	}
	helpers := make([]helper, procs)
	for i := range helpers {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d", helperEnv, uri, keys, i))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		helpers[i] = helper{cmd, in, out}
	}
	wins := make([]int, procs)
	outcome := make([]byte, 1)
	for k := range keys {
		for i, h := range helpers {
			if _, err := h.in.Write([]byte{1}); err != nil {
				t.Fatalf("release process %d: %v", i, err)
			}
		}
		winner := -1
		for i, h := range helpers {
			if _, err := io.ReadFull(h.out, outcome); err != nil {
				t.Fatalf("key %d: outcome of process %d: %v", k, i, err)
			}
			if outcome[0] != 'W' {
				continue
			}
			if winner >= 0 {
				t.Fatalf("key %d: processes %d and %d both won", k, winner, i)
			}
			winner = i
		}
		if winner < 0 {
			t.Fatalf("key %d: nobody won", k)
		}
		wins[winner]++
		wantContent(t, b, raceKey(k), fmt.Sprintf("process-%d", winner))
	}
	for i, h := range helpers {
		_ = h.in.Close()
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	t.Logf("wins per process: %v", wins)
}
