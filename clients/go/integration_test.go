package quiver_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/flightsvc"
)

var ordersSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// startServerT runs the real service for t with a checked allocator that
// must be empty once the server has stopped.
func startServerT(t *testing.T, cfg serverConfig) *testServer {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	cfg.mem = mem
	srv := startServer(cfg)
	t.Cleanup(func() {
		srv.Stop()
		mem.AssertSize(t, 0)
	})
	return srv
}

func dial(t *testing.T, addr string, opts ...quiver.Option) *quiver.Client {
	t.Helper()
	c, err := quiver.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// reader returns batches of ordersSchema of the given sizes (checked
// allocator, released at cleanup).
func reader(t *testing.T, sizes ...int) array.RecordReader {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	b := array.NewRecordBuilder(mem, ordersSchema)
	defer b.Release()
	var recs []arrow.RecordBatch
	for _, n := range sizes {
		for i := range n {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(1)
		}
		recs = append(recs, b.NewRecordBatch())
	}
	r, err := array.NewRecordReader(ordersSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		rec.Release()
	}
	t.Cleanup(func() { r.Release(); mem.AssertSize(t, 0) })
	return r
}

func TestIntegrationPut(t *testing.T) {
	srv := startServerT(t, serverConfig{})
	c := dial(t, srv.Addr)
	var acked []int64
	ack, err := c.Put(context.Background(), "devnull", reader(t, 100, 200, 300),
		quiver.WithTrace(quiver.PutTrace{BatchAck: func(a quiver.BatchAck) { acked = append(acked, a.TotalRows) }}))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Committed || ack.Rows != 600 || ack.Version != nil {
		t.Errorf("ack = %+v, want committed 600 rows without a version", ack)
	}
	if !slices.Equal(acked, []int64{100, 300, 600}) {
		t.Errorf("acked totals = %v, want [100 300 600]", acked)
	}
	if got := srv.Sinks["devnull"].Committed().Rows; got != 600 {
		t.Errorf("sink committed %d rows, want 600", got)
	}
}

func TestIntegrationErrors(t *testing.T) {
	srv := startServerT(t, serverConfig{schemas: map[string]*arrow.Schema{
		"devnull": nil,
		"fixed":   arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
	}})
	c := dial(t, srv.Addr)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"unknown endpoint", func() error { _, err := c.Put(ctx, "nope", reader(t, 1)); return err }, codes.NotFound, "nope"},
		{"schema mismatch", func() error { _, err := c.Put(ctx, "fixed", reader(t, 1)); return err }, codes.InvalidArgument, "amount"},
		{"negative epoch", func() error { _, err := c.Txn("w", -1).Put(ctx, "devnull", reader(t, 1)); return err }, codes.InvalidArgument, "epoch"},
		{"commit before precommit", func() error {
			tx := c.Txn("early", 1)
			if _, err := tx.Put(ctx, "devnull", reader(t, 1)); err != nil {
				return err
			}
			_, err := tx.Commit(ctx, nil)
			return err
		}, codes.FailedPrecondition, ""},
		{"status of an unknown transaction", func() error { _, err := c.Txn("ghost", 9).Status(ctx); return err }, codes.NotFound, ""},
		{"unknown action", func() error { _, err := c.Action(ctx, "explode", nil); return err }, codes.InvalidArgument, "explode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("err = %v (code %v), want code %v mentioning %q", err, status.Code(err), tt.code, tt.says)
			}
		})
	}
	if got := srv.Sinks["fixed"].Committed().Rows; got != 0 {
		t.Errorf("a rejected stream committed %d rows", got)
	}
}

func TestIntegrationTxn(t *testing.T) {
	srv := startServerT(t, serverConfig{schemas: map[string]*arrow.Schema{"a": nil, "b": nil}})
	c := dial(t, srv.Addr)
	ctx := context.Background()

	tx, err := c.Begin(ctx, "job", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"a", "b"} {
		ack, err := tx.Put(ctx, ep, reader(t, 10, 5))
		if err != nil {
			t.Fatal(err)
		}
		if want := (quiver.StagedAck{Staged: true, Rows: 15, Writer: "job", Epoch: 5}); ack != want {
			t.Errorf("ack on %s = %+v, want %+v", ep, ack, want)
		}
	}
	if got := srv.Sinks["a"].Committed().Rows; got != 0 {
		t.Errorf("staged rows visible before commit: %d", got)
	}
	pre, err := tx.Precommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pre.State != quiver.StatePrecommitted || len(pre.Participants) != 2 || len(pre.Participants[0].Descriptor) == 0 {
		t.Fatalf("precommit = %+v", pre)
	}
	res, err := tx.Commit(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != quiver.StateCommitted || res.Replayed || len(res.Endpoints) != 2 {
		t.Errorf("commit = %+v", res)
	}
	// Idempotent commit.
	if res, err := tx.Commit(ctx, nil); err != nil || res.State != quiver.StateCommitted {
		t.Errorf("second commit = %+v, %v", res, err)
	}
	for _, ep := range []string{"a", "b"} {
		if got := srv.Sinks[ep].Committed().Rows; got != 15 {
			t.Errorf("%s committed %d rows, want 15", ep, got)
		}
		if epoch, ok, err := c.CommittedEpoch(ctx, ep, "job"); err != nil || !ok || epoch != 5 {
			t.Errorf("CommittedEpoch(%s) = %d, %v, %v", ep, epoch, ok, err)
		}
	}

	// A replay of epoch 5 stages nothing and commits nothing new.
	replay := c.Txn("job", 5)
	ack, err := replay.Put(ctx, "a", reader(t, 7))
	if err != nil || !ack.Replayed {
		t.Fatalf("replayed put = %+v, %v", ack, err)
	}
	if res, err := replay.Commit(ctx, nil); err != nil || !res.Replayed {
		t.Errorf("replayed commit = %+v, %v", res, err)
	}
	if got := srv.Sinks["a"].Committed().Rows; got != 15 {
		t.Errorf("after the replay a has %d rows, want still 15", got)
	}

	// Rollback discards.
	next := c.Txn("job", 6)
	if _, err := next.Put(ctx, "a", reader(t, 3)); err != nil {
		t.Fatal(err)
	}
	if res, err := next.Rollback(ctx); err != nil || res.State != quiver.StateAborted {
		t.Errorf("rollback = %+v, %v", res, err)
	}
	if st, err := next.Status(ctx); err != nil || st.State != quiver.StateAborted {
		t.Errorf("status after rollback = %+v, %v", st, err)
	}
}

func TestIntegrationAuth(t *testing.T) {
	srv := startServerT(t, serverConfig{tokens: []flightsvc.Token{
		{Name: "ingest", Secret: "s3cret", Endpoints: []string{"devnull"}, Actions: []string{"health"}},
	}})
	ctx := context.Background()
	if _, err := dial(t, srv.Addr).Put(ctx, "devnull", reader(t, 1)); status.Code(err) != codes.Unauthenticated {
		t.Errorf("put without a token: %v, want Unauthenticated", err)
	}
	c := dial(t, srv.Addr, quiver.WithToken("s3cret"))
	if _, err := c.Put(ctx, "devnull", reader(t, 1)); err != nil {
		t.Errorf("put with the token: %v", err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Errorf("permitted action: %v", err)
	}
	if _, err := c.Txn("w", 1).Rollback(ctx); status.Code(err) != codes.PermissionDenied {
		t.Errorf("action not permitted: %v, want PermissionDenied", err)
	}
}

// TestIntegrationReplayFencesTheCrashedAttempt: a process puts a batch
// under (job, 1) and dies before precommit; its replay (here on the same
// connection, a pipeline retrying in-process) begins a new attempt that
// fences the first, so the commit publishes the batch once. Before
// attempts the replay's put joined the crashed one's transaction and the
// commit published 10 rows for 5. The fenced Txn can no longer put, and
// its Rollback leaves the replay's attempt alone.
func TestIntegrationReplayFencesTheCrashedAttempt(t *testing.T) {
	srv := startServerT(t, serverConfig{schemas: map[string]*arrow.Schema{"a": nil}})
	c := dial(t, srv.Addr)
	ctx := context.Background()

	crashed, err := c.Begin(ctx, "job", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(crashed.Attempt()) != 16 {
		t.Fatalf("attempt %q, want 16 hex digits", crashed.Attempt())
	}
	if _, err := crashed.Put(ctx, "a", reader(t, 5)); err != nil {
		t.Fatal(err)
	}
	replay := c.Txn("job", 1)
	if _, err := replay.Put(ctx, "a", reader(t, 5)); err != nil {
		t.Fatal(err)
	}
	if replay.Attempt() == "" || replay.Attempt() == crashed.Attempt() {
		t.Fatalf("replay attempt %q, crashed %q: want a new one", replay.Attempt(), crashed.Attempt())
	}
	if _, err := crashed.Put(ctx, "a", reader(t, 1)); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "not the current attempt") {
		t.Errorf("put of the fenced attempt: %v, want FailedPrecondition", err)
	}
	if st, err := crashed.Rollback(ctx); err != nil || st.Attempt != replay.Attempt() || st.State != quiver.StateOpen {
		t.Errorf("rollback of the fenced attempt = %+v, %v; want the replay's attempt, open", st, err)
	}
	if _, err := replay.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := replay.Commit(ctx, nil); err != nil || res.State != quiver.StateCommitted || res.Attempt != replay.Attempt() {
		t.Fatalf("commit = %+v, %v", res, err)
	}
	if got := srv.Sinks["a"].Committed().Rows; got != 5 {
		t.Errorf("committed %d rows, want the batch once (5)", got)
	}

	// A crash after precommit: Begin fences it (a replay writes again),
	// Resume keeps it (a restart whose checkpoint recorded the precommit).
	pre, err := c.Begin(ctx, "job", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pre.Put(ctx, "a", reader(t, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := pre.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	resumed, st, err := c.Resume(ctx, "job", 2, 0)
	if err != nil || st.State != quiver.StatePrecommitted || resumed.Attempt() != pre.Attempt() {
		t.Fatalf("resume = %+v, %v; want the precommitted attempt %s", st, err, pre.Attempt())
	}
	if res, err := resumed.Commit(ctx, nil); err != nil || res.State != quiver.StateCommitted {
		t.Fatalf("commit of the resumed attempt = %+v, %v", res, err)
	}
	if got := srv.Sinks["a"].Committed().Rows; got != 8 {
		t.Errorf("committed %d rows, want 8", got)
	}
	// Beginning the committed epoch again: replayed, and so are its calls.
	again, err := c.Begin(ctx, "job", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := again.Put(ctx, "a", reader(t, 3)); err != nil || !ack.Replayed {
		t.Errorf("put after a replayed begin = %+v, %v", ack, err)
	}
	if res, err := again.Commit(ctx, nil); err != nil || !res.Replayed {
		t.Errorf("commit after a replayed begin = %+v, %v", res, err)
	}
	if got := srv.Sinks["a"].Committed().Rows; got != 8 {
		t.Errorf("after the replay %d rows, want still 8", got)
	}
}
