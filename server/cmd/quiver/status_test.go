package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/server/status"
)

// TestStatus: `quiver status` prints the endpoints with their rows and last
// commit after a put, --json prints /api/status, and an address nobody
// serves is an error naming the flag.
func TestStatus(t *testing.T) {
	srv := startQuiverServer(t)
	dir := t.TempDir()
	file := writeInput(t, dir, "a.arrow", "arrow-stream", putSchema, inputBatches(t, putSchema, 2, 50))
	if code, _, stderr := runCmd("put", "--addr", srv.FlightAddr(), "--endpoint", "devnull", file); code != 0 {
		t.Fatalf("put: %s", stderr)
	}

	code, stdout, stderr := runCmd("status", "--http", srv.HTTPAddr())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	var row string
	for _, l := range lines {
		if strings.HasPrefix(l, "devnull ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 8 || f[1] != "discard" || f[3] != "ok" || f[5] != "100" || !strings.Contains(row, "100 rows") {
		t.Errorf("devnull row %q in:\n%s", row, stdout)
	}
	if !strings.HasPrefix(stdout, "quiver dev  serving") || !strings.Contains(stdout, "no open or precommitted transaction") {
		t.Errorf("status:\n%s", stdout)
	}

	code, stdout, stderr = runCmd("status", "--http", srv.HTTPAddr(), "--json")
	var st status.Status
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil || len(st.Endpoints) != 1 || st.Endpoints[0].Rows != 100 {
		t.Errorf("--json: exit %d %s: %s", code, stderr, stdout)
	}

	// --watch redraws until the context ends, then exits 0.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"status", "--http", srv.HTTPAddr(), "--watch", "--interval", "50ms"}, &out, &errOut); code != 0 || strings.Count(out.String(), "\x1b[H\x1b[2J") < 2 {
		t.Errorf("--watch: exit %d, %d redraws: %s", code, strings.Count(out.String(), "\x1b[H\x1b[2J"), errOut.String())
	}

	if code, _, stderr := runCmd("status", "--http", "127.0.0.1:1"); code != 1 || !strings.Contains(stderr, "set --http") {
		t.Errorf("unreachable: exit %d: %s", code, stderr)
	}
	if code, _, _ := runCmd("status", "extra"); code != 2 {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
}
