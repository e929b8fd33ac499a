package server

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// streamAnswer is any answer of a continuous stream.
type streamAnswer struct {
	Writer     string `json:"writer"`
	DurableSeq *int64 `json:"durable_seq"`
	Version    *int64 `json:"version"`
	Rows       int64  `json:"rows"`
	Closed     bool   `json:"closed"`
}

// rawStream is a continuous stream spoken in plain Flight, as the wire
// contract says (docs/flight.md, "Continuous streams").
type rawStream struct {
	stream  flight.FlightService_DoPutClient
	w       *flight.Writer
	schema  *arrow.Schema
	answers chan streamAnswer
	done    chan error // the call's end: nil for OK
	next    int64      // the id of the next row sent
}

// openRawStream opens a continuous stream of writer to endpoint and
// returns it with its opening answer.
func openRawStream(t *testing.T, ctx context.Context, conn *grpc.ClientConn, endpoint, writer string) (*rawStream, streamAnswer) {
	t.Helper()
	stream, err := flight.NewClientFromConn(conn, nil).DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	cmd := fmt.Sprintf(`{"endpoint":%q,"writer":%q,"stream":true}`, endpoint, writer)
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(cmd)})
	r := &rawStream{stream: stream, w: w, schema: schema, answers: make(chan streamAnswer, 1000), done: make(chan error, 1)}
	go func() {
		for {
			res, err := stream.Recv()
			if err != nil {
				if status.Code(err) == codes.OK || err.Error() == "EOF" {
					err = nil
				}
				close(r.answers)
				r.done <- err
				return
			}
			var a streamAnswer
			if err := json.Unmarshal(res.GetAppMetadata(), &a); err != nil {
				t.Errorf("answer %q: %v", res.GetAppMetadata(), err)
			}
			r.answers <- a
		}
	}()
	// The schema goes first, alone: the server answers where to resume.
	if err := w.Write(emptyBatch(schema)); err != nil {
		t.Fatal(err)
	}
	return r, r.answer(t)
}

func emptyBatch(schema *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	return b.NewRecordBatch()
}

// answer waits for the stream's next answer.
func (r *rawStream) answer(t *testing.T) streamAnswer {
	t.Helper()
	select {
	case a, ok := <-r.answers:
		if !ok {
			t.Fatalf("the stream ended without an answer: %v", <-r.done)
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
	}
	return streamAnswer{}
}

// send sends one batch of rows ids with seq (-1: none).
func (r *rawStream) send(t *testing.T, rows int, seq int64) error {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for range rows {
		b.Append(r.next)
		r.next++
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(r.schema, []arrow.Array{col}, int64(rows))
	defer rec.Release()
	var meta []byte
	if seq >= 0 {
		meta = fmt.Appendf(nil, `{"seq":%d}`, seq)
	}
	return r.w.WriteWithAppMetadata(rec, meta)
}

// tableRows reads how many rows the table dir/tables/name has, with the
// client's committed-epoch for appID (-1: none), which reads the txn
// (Delta) or the quiver.seqs property (Lance).
func tableRows(t *testing.T, s *testServer, dir, name, appID string) (rows, seq int64) {
	t.Helper()
	b, err := storage.Open(t.Context(), "file://"+filepath.Join(dir, "tables", name), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if strings.HasPrefix(name, "lance") {
		d, err := lancetable.Latest(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Manifest.Fragments {
			rows += int64(f.LiveRows())
		}
	} else {
		snap, err := deltalog.Load(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		n, complete := snap.NumRecords()
		if !complete {
			t.Fatal("incomplete stats")
		}
		rows = int64(n)
	}
	seq, ok, err := dialClient(t, s).CommittedEpoch(t.Context(), name, appID)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		seq = -1
	}
	return rows, seq
}

const continuousDelta = `endpoints:
  - name: events
    sink: delta
    delta: {table_uri: "file://tables/events"}
    stream: {commit_interval: 50ms}
  - name: lance-events
    sink: lance
    lance: {dataset_uri: "file://tables/lance-events"}
    stream: {commit_interval: 50ms}
  - name: devnull
    sink: discard
`

// TestContinuousStream: the wire contract end to end on a Delta and a
// Lance endpoint: the opening answer, durable answers while the stream
// stays open (rows visible before it ends), the writer's seq recorded by
// the sink, the closed answer, and a resumed writer whose replayed seqs
// are dropped.
func TestContinuousStream(t *testing.T) {
	for _, name := range []string{"events", "lance-events"} {
		t.Run(name, func(t *testing.T) { testContinuousStream(t, name) })
	}
}

func testContinuousStream(t *testing.T, name string) {
	dir := t.TempDir()
	s := startServerIn(t, dir, continuousDelta)
	conn := dial(t, s.FlightAddr())
	ctx := t.Context()

	r, open := openRawStream(t, ctx, conn, name, "collector-7")
	if open.Writer != "collector-7" || open.DurableSeq != nil {
		t.Fatalf("opening answer %+v, want writer collector-7 and durable_seq null", open)
	}
	for seq := range int64(3) {
		if err := r.send(t, 100, seq); err != nil {
			t.Fatal(err)
		}
	}
	// Durable while the stream is open.
	var durable int64 = -1
	for durable < 2 {
		a := r.answer(t)
		if a.DurableSeq == nil || a.Version == nil {
			t.Fatalf("durable answer %+v lacks durable_seq or version", a)
		}
		durable = *a.DurableSeq
	}
	if rows, txn := tableRows(t, s, dir, name, "collector-7"); rows != 300 || txn != 2 {
		t.Fatalf("table: %d rows, txn %d; want 300 rows and txn 2 while the stream is open", rows, txn)
	}
	// The status page lists the open stream with its seqs.
	_, st := getStatus(t, s, "")
	if cs := endpointOf(t, st, name).Continuous; len(cs) != 1 || cs[0].Writer != "collector-7" || cs[0].DurableSeq == nil || *cs[0].DurableSeq != 2 || cs[0].LastSeq == nil || *cs[0].LastSeq != 2 {
		t.Fatalf("status: continuous streams %+v, want collector-7 at durable and last seq 2", cs)
	}
	if err := r.send(t, 50, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var last streamAnswer
	for a := range r.answers {
		last = a
	}
	if err := <-r.done; err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
	if !last.Closed || last.DurableSeq == nil || *last.DurableSeq != 3 {
		t.Fatalf("last answer %+v, want closed with durable_seq 3", last)
	}

	// A resumed writer learns its durable seq; resent seqs are dropped.
	r2, open := openRawStream(t, ctx, conn, name, "collector-7")
	if open.DurableSeq == nil || *open.DurableSeq != 3 {
		t.Fatalf("reopened: %+v, want durable_seq 3", open)
	}
	for _, seq := range []int64{2, 3, 4} {
		if err := r2.send(t, 10, seq); err != nil {
			t.Fatal(err)
		}
	}
	r2.w.Close()
	r2.stream.CloseSend()
	for a := range r2.answers {
		last = a
	}
	if err := <-r2.done; err != nil {
		t.Fatal(err)
	}
	if !last.Closed || *last.DurableSeq != 4 {
		t.Fatalf("last answer %+v, want closed with durable_seq 4", last)
	}
	if rows, txn := tableRows(t, s, dir, name, "collector-7"); rows != 360 || txn != 4 {
		t.Fatalf("table: %d rows, txn %d; want 360 rows (the replayed seqs dropped) and txn 4", rows, txn)
	}
}

// TestContinuousStreamKafka: continuous streams into a Kafka endpoint:
// the records of a group commit and the writers' seq markers land in one
// Kafka transaction; a reopened stream resumes at the durable seq and its
// resent seqs are dropped.
func TestContinuousStreamKafka(t *testing.T) {
	broker, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: 1, Topics: []string{"clicks", "_quiver_commits"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	s := startServerIn(t, t.TempDir(), fmt.Sprintf(`endpoints:
  - name: clicks
    sink: kafka
    kafka: {brokers: [%q], topic: clicks, format: json}
    stream: {commit_interval: 50ms}
`, broker.Addrs()[0]))
	conn := dial(t, s.FlightAddr())
	ctx := t.Context()
	for round, seqs := range [][]int64{{0, 1, 2}, {1, 2, 3}} {
		r, open := openRawStream(t, ctx, conn, "clicks", "k1")
		if want := []*int64{nil, ptr(int64(2))}[round]; (open.DurableSeq == nil) != (want == nil) || want != nil && *open.DurableSeq != *want {
			t.Fatalf("round %d opened at %+v", round, open)
		}
		for _, seq := range seqs {
			if err := r.send(t, 5, seq); err != nil {
				t.Fatal(err)
			}
		}
		r.w.Close()
		r.stream.CloseSend()
		var last streamAnswer
		for a := range r.answers {
			last = a
		}
		if err := <-r.done; err != nil || !last.Closed || *last.DurableSeq != seqs[len(seqs)-1] {
			t.Fatalf("round %d ended with %v, last answer %+v", round, err, last)
		}
	}
	recs, err := devbroker.ReadCommitted(ctx, broker.Addrs(), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20 {
		t.Fatalf("the topic holds %d records, want 20 (4 seqs of 5 rows; the resent seqs dropped)", len(recs))
	}
}

func ptr[T any](v T) *T { return &v }

// TestContinuousStreamIdle: a continuous stream quiet for
// limits.stream_idle_timeout ends with Unavailable (its client
// reconnects), and what it sent is committed.
func TestContinuousStreamIdle(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, "limits: {stream_idle_timeout: 300ms}\n"+continuousDelta)
	conn := dial(t, s.FlightAddr())
	r, _ := openRawStream(t, t.Context(), conn, "events", "quiet")
	if err := r.send(t, 10, 0); err != nil {
		t.Fatal(err)
	}
	for range r.answers {
	}
	if err := <-r.done; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "what it sent is committed") {
		t.Fatalf("an idle continuous stream ended with %v, want Unavailable saying its rows are committed", err)
	}
	if rows, seq := tableRows(t, s, dir, "events", "quiet"); rows != 10 || seq != 0 {
		t.Fatalf("table: %d rows, seq %d; want 10 rows at seq 0", rows, seq)
	}
}

// TestContinuousStreamsShareCommits: many writers' streams land in few
// commits, each recording every advanced writer.
func TestContinuousStreamsShareCommits(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, continuousDelta)
	conn := dial(t, s.FlightAddr())
	ctx := t.Context()
	const writers, batches, rows = 8, 20, 100
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			r, _ := openRawStream(t, ctx, conn, "events", fmt.Sprintf("w%d", i))
			for seq := range int64(batches) {
				if err := r.send(t, rows, seq); err != nil {
					t.Error(err)
					return
				}
			}
			r.w.Close()
			r.stream.CloseSend()
			for range r.answers {
			}
			if err := <-r.done; err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	total, _ := tableRows(t, s, dir, "events", "none")
	if total != writers*batches*rows {
		t.Fatalf("table has %d rows, want %d", total, writers*batches*rows)
	}
	for i := range writers {
		if _, txn := tableRows(t, s, dir, "events", fmt.Sprintf("w%d", i)); txn != batches-1 {
			t.Errorf("writer w%d: txn %d, want %d", i, txn, batches-1)
		}
	}
}

// TestContinuousStreamRefusals: a second stream fences the first
// (Aborted); a stream writer is refused for transactions and the other
// way round; a sink without streams refuses them.
func TestContinuousStreamRefusals(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, continuousDelta)
	conn := dial(t, s.FlightAddr())
	c := dialClient(t, s)
	ctx := t.Context()

	first, _ := openRawStream(t, ctx, conn, "events", "w")
	if err := first.send(t, 10, 0); err != nil {
		t.Fatal(err)
	}
	if a := first.answer(t); a.DurableSeq == nil || *a.DurableSeq != 0 {
		t.Fatalf("answer %+v, want durable_seq 0", a)
	}
	second, open := openRawStream(t, ctx, conn, "events", "w")
	if open.DurableSeq == nil || *open.DurableSeq != 0 {
		t.Fatalf("the second stream opened at %+v, want durable_seq 0", open)
	}
	for range first.answers {
	}
	if err := <-first.done; status.Code(err) != codes.Aborted {
		t.Fatalf("the fenced stream ended with %v, want Aborted", err)
	}
	second.w.Close()
	second.stream.CloseSend()
	for range second.answers {
	}
	if err := <-second.done; err != nil {
		t.Fatal(err)
	}

	if _, err := c.Begin(ctx, "w", 1, 0); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("begin of a stream writer: %v, want FailedPrecondition", err)
	}
	if _, err := c.Begin(ctx, "job", 1, 0); err != nil {
		t.Fatal(err)
	}
	for _, target := range []struct{ endpoint, writer string }{{"events", "job"}, {"devnull", "other"}} {
		r, err := flight.NewClientFromConn(conn, nil).DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
		w := flight.NewRecordWriter(r, ipc.WithSchema(schema))
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: fmt.Appendf(nil, `{"endpoint":%q,"writer":%q,"stream":true}`, target.endpoint, target.writer)})
		w.Write(emptyBatch(schema))
		_, err = r.Recv()
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("stream to %s as %s: %v, want FailedPrecondition", target.endpoint, target.writer, err)
		}
	}
}
