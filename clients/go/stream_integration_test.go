package quiver_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// streamEndpoints is a Delta endpoint taking continuous streams, with
// commits frequent enough for tests.
const streamEndpoints = `endpoints:
  - name: events
    sink: delta
    delta: {table_uri: "file://tables/events"}
    stream: {commit_interval: 100ms}
`

// startStreamServer runs the whole server (config, sinks, Flight
// service) on 127.0.0.1:0 with its files under dir; it panics on failure
// (examples have no *testing.T). Shut it down with Shutdown.
func startStreamServer(dir string, mem memory.Allocator) *server.Server {
	doc := "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: data\n" + streamEndpoints
	cfg, err := config.Parse([]byte(doc), dir, server.Sinks())
	must(err)
	srv, err := server.New(cfg, server.Options{Allocator: mem})
	must(err)
	must(srv.Start(context.Background()))
	return srv
}

// startQuiverIn is startStreamServer for t, shut down at cleanup (or
// before) with a checked allocator left empty.
func startQuiverIn(t *testing.T, dir string) *server.Server {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	srv := startStreamServer(dir, mem)
	t.Cleanup(func() {
		shutdown(t, srv)
		mem.AssertSize(t, 0)
	})
	return srv
}

func shutdown(t *testing.T, srv *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// deltaTable returns the rows of the Delta table dir/tables/name and the
// txn version of appID (-1: none).
func deltaTable(t *testing.T, dir, name, appID string) (rows, txn int64) {
	t.Helper()
	b, err := storage.Open(t.Context(), "file://"+filepath.Join(dir, "tables", name), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snap, err := deltalog.Load(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	n, complete := snap.NumRecords()
	if !complete {
		t.Fatal("the Delta log lacks row counts")
	}
	v, ok := snap.TxnVersion(appID)
	if !ok {
		v = -1
	}
	return int64(n), v
}

// writeBatches writes n batches of 100 rows and checks their seqs follow
// from first.
func writeBatches(t *testing.T, s *quiver.Stream, first int64, n int) {
	t.Helper()
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 100
	}
	r := reader(t, sizes...)
	for i := int64(0); r.Next(); i++ {
		seq, err := s.Write(t.Context(), r.RecordBatch())
		if err != nil {
			t.Fatal(err)
		}
		if seq != first+i {
			t.Fatalf("seq %d, want %d", seq, first+i)
		}
	}
}

// TestIntegrationStream: a continuous stream to a Delta endpoint of the
// real server, through a proxy that cuts the connection once and then
// sends the stream to a restarted server on the same data. Every batch
// lands exactly once: the table has each row once and the writer's txn
// is its last seq.
func TestIntegrationStream(t *testing.T) {
	dir := t.TempDir()
	first := startQuiverIn(t, dir)
	proxy := quiver.StartCutProxy(t, first.FlightAddr())
	c := dial(t, proxy.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	s, err := c.Stream(ctx, "events", "collector-7", quiver.WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, s, 0, 3)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Durable(); got != 2 {
		t.Fatalf("Durable() = %d after Flush, want 2", got)
	}
	if v, ok := s.Version(); !ok || v < 0 {
		t.Errorf("Version() = %d, %v; want a Delta version", v, ok)
	}

	// A network failure with batches in flight.
	writeBatches(t, s, 3, 3)
	proxy.Cut()
	writeBatches(t, s, 6, 3)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Durable(); got != 8 {
		t.Fatalf("Durable() = %d after the cut, want 8", got)
	}
	if n := proxy.Accepted(); n < 2 {
		t.Errorf("%d connections: the cut did not make the stream reconnect", n)
	}

	// A server restart with batches not yet durable: the stopping server
	// commits them and ends the stream with Unavailable; the new one
	// reads the writer's durable seq from the table.
	writeBatches(t, s, 9, 3)
	shutdown(t, first)
	second := startQuiverIn(t, dir)
	proxy.SetTarget(second.FlightAddr())
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Durable(); got != 11 {
		t.Errorf("Durable() = %d after Close, want 11", got)
	}
	if rows, txn := deltaTable(t, dir, "events", "collector-7"); rows != 1200 || txn != 11 {
		t.Errorf("table: %d rows, txn %d; want 1200 rows (12 batches once) and txn 11", rows, txn)
	}
	if epoch, ok, err := c.CommittedEpoch(ctx, "events", "collector-7"); err != nil || !ok || epoch != 11 {
		t.Errorf("CommittedEpoch = %d, %v, %v; want 11", epoch, ok, err)
	}
}

// TestIntegrationStreamFinalErrors: the real server's fencing and
// writer-name rules end a Stream with their status, without reconnecting.
func TestIntegrationStreamFinalErrors(t *testing.T) {
	dir := t.TempDir()
	srv := startQuiverIn(t, dir)
	c := dial(t, srv.FlightAddr())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// A second stream of the writer fences the first, whose rows the
	// server received are still committed: the second one's opening
	// answer says how far, 2 or 3 (the last Write may not have been sent
	// yet).
	first, err := c.Stream(ctx, "events", "collector-7")
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, first, 0, 3)
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeBatches(t, first, 3, 1)
	second, err := c.Stream(ctx, "events", "collector-7", quiver.WithStreamSchema(ordersSchema))
	if err != nil {
		t.Fatal(err)
	}
	opened := second.Durable()
	if err := first.Flush(ctx); status.Code(err) != codes.Aborted {
		t.Errorf("flush of the fenced stream: %v, want Aborted", err)
	}
	if _, err := first.Write(ctx, emptyOrders(t)); status.Code(err) != codes.Aborted {
		t.Errorf("write to the fenced stream: %v, want Aborted", err)
	}
	if err := first.Close(ctx); status.Code(err) != codes.Aborted {
		t.Errorf("close of the fenced stream: %v, want Aborted", err)
	}
	if opened != 2 && opened != 3 {
		t.Fatalf("the second stream opened at durable seq %d, want 2 or 3", opened)
	}
	writeBatches(t, second, opened+1, 1)
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, txn := deltaTable(t, dir, "events", "collector-7"); rows != 100*(opened+2) || txn != opened+1 {
		t.Errorf("table: %d rows, txn %d; want %d and %d", rows, txn, 100*(opened+2), opened+1)
	}

	// A writer of epoch transactions cannot stream, and the other way round.
	if _, err := c.Begin(ctx, "job", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stream(ctx, "events", "job", quiver.WithStreamSchema(ordersSchema)); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stream of a transaction writer: %v, want FailedPrecondition", err)
	}
	if _, err := c.Begin(ctx, "collector-7", 1, 0); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("begin of a stream writer: %v, want FailedPrecondition", err)
	}
}

// emptyOrders is a batch of ordersSchema without rows.
func emptyOrders(t *testing.T) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, ordersSchema)
	defer b.Release()
	rec := b.NewRecordBatch()
	t.Cleanup(rec.Release)
	return rec
}
