package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// withStdin makes quiver stream read r for the rest of the test.
func withStdin(t *testing.T, r io.Reader) {
	t.Helper()
	old := stdin
	stdin = r
	t.Cleanup(func() { stdin = old })
}

func TestStreamBadInvocations(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		input string
		code  int
		says  string
	}{
		{"no writer", []string{"stream", "--endpoint", "e"}, "", 2, "--endpoint and --writer are required"},
		{"no endpoint", []string{"stream", "--writer", "w"}, "", 2, "--endpoint and --writer are required"},
		{"a file argument", []string{"stream", "--endpoint", "e", "--writer", "w", "in.arrows"}, "", 2, "comes from stdin"},
		{"not arrow", []string{"stream", "--endpoint", "e", "--writer", "w"}, "this is not arrow", 1, "not an Arrow IPC stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withStdin(t, strings.NewReader(tt.input))
			code, stdout, stderr := runCmd(tt.args...)
			if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.says) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d mentioning %q", code, stdout, stderr, tt.code, tt.says)
			}
		})
	}
}

// streamEndpoints: a Delta endpoint taking continuous streams, and one
// whose sink takes none.
const streamEndpoints = `endpoints:
  - name: events
    sink: delta
    delta: {table_uri: "file://tables/events"}
    stream: {commit_interval: 100ms}
  - name: devnull
    sink: discard
`

// ipcStream returns recs as Arrow IPC stream bytes.
func ipcStream(t *testing.T, recs []arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(putSchema))
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestStreamCommand(t *testing.T) {
	addr := startQuiverWith(t, streamEndpoints).FlightAddr()
	input := ipcStream(t, inputBatches(t, putSchema, 3, 100))
	stream := func(t *testing.T, endpoint string, in []byte) (int, string, string) {
		t.Helper()
		withStdin(t, bytes.NewReader(in))
		return runCmd("stream", "--addr", addr, "--endpoint", endpoint, "--writer", "cli-1")
	}
	tests := []struct {
		name    string
		input   []byte
		rows    int64
		batches int64
		durable int64
	}{
		{"first run", input, 300, 3, 2},
		{"the writer goes on from its durable seq", input, 300, 3, 5},
		{"a schema only", ipcStream(t, nil), 0, 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := stream(t, "events", tt.input)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var sum struct {
				Rows, Batches int64
				DurableSeq    *int64 `json:"durable_seq"`
				Version       *int64
			}
			if err := json.Unmarshal([]byte(stdout), &sum); err != nil || strings.Count(stdout, "\n") != 1 {
				t.Fatalf("stdout %q: want one line of JSON (%v)", stdout, err)
			}
			if sum.Rows != tt.rows || sum.Batches != tt.batches || sum.DurableSeq == nil || *sum.DurableSeq != tt.durable {
				t.Errorf("summary %s, want %d rows, %d batches, durable_seq %d", stdout, tt.rows, tt.batches, tt.durable)
			}
			if (sum.Version != nil) != (tt.batches > 0) {
				t.Errorf("summary %s: want a version exactly when batches were committed", stdout)
			}
		})
	}

	t.Run("input broken after two batches", func(t *testing.T) {
		code, stdout, stderr := stream(t, "events", input[:len(input)-20])
		if code != 1 || stdout != "" || !strings.Contains(stderr, "durable seq 7 after 2 batches") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1 with the two batches written durable (seq 7)", code, stdout, stderr)
		}
		code, stdout, stderr = runCmd("action", "--addr", addr, "--compact", "committed-epoch", `{"endpoint":"events","writer":"cli-1"}`)
		if code != 0 || stdout != `{"endpoint":"events","writer":"cli-1","epoch":7}`+"\n" {
			t.Errorf("committed-epoch: exit %d, stdout %q, stderr %q; want epoch 7", code, stdout, stderr)
		}
	})
	t.Run("an endpoint without streams", func(t *testing.T) {
		code, stdout, stderr := stream(t, "devnull", input)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "does not take continuous streams") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1 saying devnull takes no streams", code, stdout, stderr)
		}
	})
}

// TestStreamServerDown: with no server the command keeps reconnecting,
// saying so on stderr, until it is interrupted.
func TestStreamServerDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	withStdin(t, bytes.NewReader(ipcStream(t, inputBatches(t, putSchema, 1, 10))))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"stream", "--addr", addr, "--endpoint", "events", "--writer", "w"}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "Unavailable") ||
		!strings.Contains(stderr.String(), "reconnecting in") || !strings.Contains(stderr.String(), "context deadline exceeded") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 after reconnection notices", code, stdout.String(), stderr.String())
	}
}
