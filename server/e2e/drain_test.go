package e2e

import (
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// gatedReader is a record reader that stops before its second batch until
// gate is closed, so that a stream is in flight while the test acts.
type gatedReader struct {
	array.RecordReader
	gate <-chan struct{}
	read int
}

func (g *gatedReader) Next() bool {
	if g.read == 1 {
		<-g.gate
	}
	g.read++
	return g.RecordReader.Next()
}

// TestSIGTERMDrains: on SIGTERM the server stops taking work (/readyz
// answers 503, a new stream is refused) and lets the stream in flight
// finish: it commits all its rows, and the process then exits 0.
func TestSIGTERMDrains(t *testing.T) {
	tableDir := filepath.Join(t.TempDir(), "events")
	p := startQuiver(t, writeConfig(t, t.TempDir(), deltaAppend(tableDir)))
	ctx := ctxT(t)
	gate := make(chan struct{})
	type result struct {
		rows      int64
		committed bool
		err       error
	}
	done := make(chan result, 1)
	go func() {
		ack, err := dial(t, p).Put(ctx, deltaEndpoint, &gatedReader{RecordReader: idRows(t, 0, 2000), gate: gate})
		done <- result{ack.Rows, ack.Committed, err}
	}()
	batches := `quiver_batches_total{endpoint="events"}`
	pollFor(t, p, 30*time.Second, "the first batch of the stream", func() bool { return p.metric(t, batches) >= 1 })

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	pollFor(t, p, 30*time.Second, "/readyz to answer 503 while draining", func() bool {
		code, _ := p.readyz(t)
		return code == http.StatusServiceUnavailable
	})
	if _, err := dial(t, p).Put(ctx, deltaEndpoint, idRows(t, 5000, 10)); err == nil {
		t.Fatal("a new stream was accepted while the server drained")
	}

	close(gate)
	res := <-done
	if res.err != nil || !res.committed || res.rows != 2000 {
		t.Fatalf("the stream in flight at SIGTERM: rows %d, committed %v, err %v; want 2000 rows committed", res.rows, res.committed, res.err)
	}
	p.waitExit(t)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("quiver exited with %d after draining:\n%s", code, p.output())
	}
	readDelta(t, tableDir).wantIDs(t, 2000)
}
