package quiver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeAddr is the server address the README's snippets use.
const readmeAddr = "127.0.0.1:8815"

// TestREADMEGoProgram runs the README's Go program exactly as written,
// only the server address substituted, with `go run` against a server
// in process, and checks what it prints and what the server received.
func TestREADMEGoProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go run builds a program")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindAllSubmatch(readme, -1)
	if len(blocks) != 1 || !strings.Contains(string(blocks[0][1]), readmeAddr) {
		t.Fatalf("README.md has %d Go blocks, want one naming %s", len(blocks), readmeAddr)
	}
	srv := startServer(serverConfig{})
	defer srv.Stop()
	// A folder of the module whose name starts with "." is left out of
	// ./... patterns, so the program is built with the module's go.mod.
	dir, err := os.MkdirTemp(".", ".readme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(strings.ReplaceAll(string(blocks[0][1]), readmeAddr, srv.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+main)
	cmd.Env = append(os.Environ(), "QUIVER_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run README.md's program: %v\n%s", err, out)
	}
	if want := "committed=true rows=3\nepoch 42 committed, replayed=false\n"; string(out) != want {
		t.Fatalf("the program printed %q, want %q", out, want)
	}
	if rows := srv.Sinks["devnull"].Committed().Rows; rows != 6 {
		t.Fatalf("the server received %d rows, want 6", rows)
	}
}
