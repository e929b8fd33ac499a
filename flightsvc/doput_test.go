package flightsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

func TestAutoCommitPut(t *testing.T) {
	s := startServer(t, serverConfig{})
	acks, err := s.put(t.Context(), pathDesc("events"), 10, 20, 30)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"batch":0,"rows":10}`,
		`{"batch":1,"rows":20}`,
		`{"batch":2,"rows":30}`,
		`{"committed":true,"rows":60}`,
	}
	if !reflect.DeepEqual(acks, want) {
		t.Fatalf("acks = %q, want %q", acks, want)
	}
	sink := s.sinks["events"]
	if got := sink.Committed(); got.Rows != 60 || got.Batches != 3 {
		t.Fatalf("committed %+v, want 60 rows in 3 batches", got)
	}
	if n := sink.OpenKeys(); n != 0 {
		t.Fatalf("%d keys left staged after the commit", n)
	}
	ep := map[string]string{"endpoint": "events"}
	for name, want := range map[string]float64{
		"quiver_rows_total":     60,
		"quiver_batches_total":  3,
		"quiver_write_seconds":  3, // samples
		"quiver_commit_seconds": 1,
		"quiver_buffered_bytes": 0,
		"quiver_streams_active": 0,
	} {
		if got := s.metric(name, ep); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := s.metric("quiver_commits_total", map[string]string{"endpoint": "events", "result": "committed"}); got != 1 {
		t.Errorf("committed commits = %v, want 1", got)
	}
	if s.metric("quiver_bytes_total", ep) <= 0 {
		t.Error("quiver_bytes_total did not grow")
	}
}

func TestAutoCommitEmptyStream(t *testing.T) {
	s := startServer(t, serverConfig{})
	acks, err := s.put(t.Context(), pathDesc("events"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`{"committed":true,"rows":0}`}; !reflect.DeepEqual(acks, want) {
		t.Fatalf("acks = %q, want %q", acks, want)
	}
	if got := s.sinks["events"].Committed(); got != (discard.Totals{}) {
		t.Fatalf("an empty stream committed %+v", got)
	}
}

func TestTransactionalPutPrecommitCommit(t *testing.T) {
	s := startServer(t, serverConfig{})
	acks, err := s.put(t.Context(), txnDesc("events", "job-1", 7), 5, 6)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := acks[len(acks)-1], `{"staged":true,"rows":11,"writer":"job-1","epoch":7}`; got != want {
		t.Fatalf("final ack %s, want %s", got, want)
	}
	sink := s.sinks["events"]
	if sink.Committed().Rows != 0 {
		t.Fatal("staged rows are visible before commit")
	}

	pre := s.mustAction("precommit", `{"writer":"job-1","epoch":7}`)
	if pre["state"] != "precommitted" {
		t.Fatalf("precommit state %v", pre["state"])
	}
	parts := pre["participants"].([]any)
	if len(parts) != 1 {
		t.Fatalf("participants %v, want one", parts)
	}
	p := parts[0].(map[string]any)
	if p["endpoint"] != "events" || p["rows"] != 11.0 || p["descriptor"] == "" {
		t.Fatalf("participant %v, want events with 11 rows and a descriptor", p)
	}

	st := s.mustAction("status", `{"writer":"job-1","epoch":7}`)
	if st["state"] != "precommitted" || st["deadline"] == nil {
		t.Fatalf("status %v: want precommitted with a deadline", st)
	}

	com := s.mustAction("commit", `{"writer":"job-1","epoch":7}`)
	if com["state"] != "committed" || com["replayed"] != nil {
		t.Fatalf("commit %v", com)
	}
	if eps := com["endpoints"].(map[string]any); !reflect.DeepEqual(eps, map[string]any{"events": map[string]any{}}) {
		t.Fatalf("commit endpoints %v, want events without a version", eps)
	}
	if got := sink.Committed().Rows; got != 11 {
		t.Fatalf("committed %d rows, want 11", got)
	}
	ce := s.mustAction("committed-epoch", `{"endpoint":"events","writer":"job-1"}`)
	if ce["epoch"] != 7.0 {
		t.Fatalf("committed-epoch %v, want 7", ce)
	}
	ce = s.mustAction("committed-epoch", `{"endpoint":"events","writer":"job-2"}`)
	if v, ok := ce["epoch"]; !ok || v != nil {
		t.Fatalf("committed-epoch of an unknown writer %v, want epoch null", ce)
	}
}

func TestBeginThenPut(t *testing.T) {
	s := startServer(t, serverConfig{})
	got := s.mustAction("begin", `{"writer":"job-1","epoch":1,"ttl_s":60}`)
	attempt, _ := got["attempt"].(string)
	if want := map[string]any{"writer": "job-1", "epoch": 1.0, "state": "open", "attempt": attempt}; !reflect.DeepEqual(got, want) || len(attempt) != 16 {
		t.Fatalf("begin = %v, want %v with an attempt of 16 hex digits", got, want)
	}
	if _, err := s.put(t.Context(), txnDesc("events", "job-1", 1), 3); err != nil {
		t.Fatal(err)
	}
	s.mustAction("precommit", `{"writer":"job-1","epoch":1}`)
	s.mustAction("commit", `{"writer":"job-1","epoch":1}`)
	if got := s.sinks["events"].Committed().Rows; got != 3 {
		t.Fatalf("committed %d rows, want 3", got)
	}
}

func TestRollback(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "job-1", 1), 5); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if got := s.mustAction("rollback", `{"writer":"job-1","epoch":1}`); got["state"] != "aborted" {
			t.Fatalf("rollback %v", got)
		}
	}
	sink := s.sinks["events"]
	if sink.Committed().Rows != 0 || sink.OpenKeys() != 0 {
		t.Fatalf("after rollback: committed %+v, %d keys staged", sink.Committed(), sink.OpenKeys())
	}
	if _, err := s.action(t.Context(), "commit", `{"writer":"job-1","epoch":1}`); err == nil {
		t.Fatal("commit after rollback succeeded")
	}
}

func TestDoubleCommit(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "job-1", 1), 5); err != nil {
		t.Fatal(err)
	}
	s.mustAction("precommit", `{"writer":"job-1","epoch":1}`)
	first := s.mustAction("commit", `{"writer":"job-1","epoch":1}`)
	second := s.mustAction("commit", `{"writer":"job-1","epoch":1}`)
	if first["state"] != "committed" || second["state"] != "committed" {
		t.Fatalf("commits %v then %v, want committed twice", first, second)
	}
	if got := s.sinks["events"].Committed().Rows; got != 5 {
		t.Fatalf("committed %d rows after two commits, want 5", got)
	}
}

func TestReplayedEpoch(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "job-1", 5), 5); err != nil {
		t.Fatal(err)
	}
	s.mustAction("precommit", `{"writer":"job-1","epoch":5}`)
	s.mustAction("commit", `{"writer":"job-1","epoch":5}`)

	sink := s.sinks["events"]
	for _, epoch := range []int64{5, 3} {
		t.Run(fmt.Sprint("epoch-", epoch), func(t *testing.T) {
			acks, err := s.put(t.Context(), txnDesc("events", "job-1", epoch), 4, 4)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`{"replayed":true,"rows":8,"writer":"job-1","epoch":%d}`, epoch)
			if got := acks[len(acks)-1]; got != want {
				t.Fatalf("final ack %s, want %s", got, want)
			}
			if n := sink.OpenKeys(); n != 0 {
				t.Fatalf("a replayed stream staged data under %d keys", n)
			}
			body := fmt.Sprintf(`{"writer":"job-1","epoch":%d}`, epoch)
			s.mustAction("precommit", body)
			com := s.mustAction("commit", body)
			if com["state"] != "committed" || com["replayed"] != true {
				t.Fatalf("commit of a replayed epoch = %v, want committed and replayed", com)
			}
			if got := sink.Committed().Rows; got != 5 {
				t.Fatalf("committed %d rows, want still 5", got)
			}
		})
	}
}

func TestTwoStreamsTwoEndpoints(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{
		"events": discard.New(nil),
		"users":  discard.New(nil),
	}})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, ep := range []string{"events", "events", "users"} {
		wg.Go(func() {
			_, errs[i] = s.put(t.Context(), txnDesc(ep, "job-1", 1), 10, 10)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pre := s.mustAction("precommit", `{"writer":"job-1","epoch":1}`)
	rows := map[string]float64{}
	for _, p := range pre["participants"].([]any) {
		p := p.(map[string]any)
		rows[p["endpoint"].(string)] = p["rows"].(float64)
	}
	if want := map[string]float64{"events": 40, "users": 20}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("participant rows %v, want %v", rows, want)
	}
	com := s.mustAction("commit", `{"writer":"job-1","epoch":1}`)
	if len(com["endpoints"].(map[string]any)) != 2 {
		t.Fatalf("commit endpoints %v, want two", com["endpoints"])
	}
	if e, u := s.sinks["events"].Committed().Rows, s.sinks["users"].Committed().Rows; e != 40 || u != 20 {
		t.Fatalf("committed events=%d users=%d, want 40 and 20", e, u)
	}
}

// Two servers write one table: the second precommits its rows and hands its
// descriptor to the first, which publishes both in one commit.
func TestCommitHandedDescriptors(t *testing.T) {
	table := discard.New(nil)
	key := descseal.GenerateKey() // one deployment: the servers share the key
	first := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": table}, descriptorKey: key})
	second := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": table.Peer()}, descriptorKey: key})

	if _, err := second.put(t.Context(), txnDesc("events", "job-1", 1), 7); err != nil {
		t.Fatal(err)
	}
	pre := second.mustAction("precommit", `{"writer":"job-1","epoch":1}`)
	handed := pre["participants"].([]any)[0].(map[string]any)["descriptor"].(string)

	if _, err := first.put(t.Context(), txnDesc("events", "job-1", 1), 5); err != nil {
		t.Fatal(err)
	}
	first.mustAction("precommit", `{"writer":"job-1","epoch":1}`)
	body, _ := json.Marshal(map[string]any{"writer": "job-1", "epoch": 1, "descriptors": map[string][]string{"events": {handed}}})
	if com := first.mustAction("commit", string(body)); com["state"] != "committed" {
		t.Fatalf("commit %v", com)
	}
	if got := table.Committed().Rows; got != 12 {
		t.Fatalf("committed %d rows, want 12 (5 own + 7 handed over)", got)
	}
	// The second server's own commit finds the epoch published.
	if com := second.mustAction("commit", `{"writer":"job-1","epoch":1}`); com["state"] != "committed" {
		t.Fatalf("second server's commit %v", com)
	}
	if got := table.Committed().Rows; got != 12 {
		t.Fatalf("committed %d rows after the second server's commit, want still 12", got)
	}
}

// failingWriter is a discard writer whose Write fails from batch failAt on.
type failingWriter struct {
	*discard.Writer
	mu     sync.Mutex
	writes int
	failAt int
}

func (w *failingWriter) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	w.mu.Lock()
	w.writes++
	n := w.writes
	w.mu.Unlock()
	if n > w.failAt {
		return writers.Errorf(writers.ErrUnavailable, "test: sink down")
	}
	return w.Writer.Write(ctx, key, rec)
}

// A Write failing while the client waits for acks (its next message not
// sent yet) ends the stream at once; nothing is published.
func TestWriteFailsWhileClientWaits(t *testing.T) {
	sink := &failingWriter{Writer: discard.New(nil), failAt: 1}
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": sink}})
	stream, err := s.client.DoPut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(testSchema()), ipc.WithAllocator(s.mem))
	defer w.Close()
	w.SetFlightDescriptor(pathDesc("events"))
	for i := range 2 {
		rec := s.record(3)
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		ack, err := stream.Recv()
		if i == 0 {
			if err != nil || string(ack.GetAppMetadata()) != `{"batch":0,"rows":3}` {
				t.Fatalf("first ack %v, %v", ack, err)
			}
			continue
		}
		wantCode(t, err, codes.Unavailable, "sink down", "batch 1")
	}
	if sink.Committed().Rows != 0 || sink.OpenKeys() != 0 {
		t.Fatalf("after the failure: committed %+v, %d keys staged", sink.Committed(), sink.OpenKeys())
	}
	testpoll.Until(t, "the abort to be counted", func() bool {
		return s.metric("quiver_commits_total", map[string]string{"endpoint": "events", "result": "aborted"}) == 1
	})
}

// A client canceling mid-stream publishes nothing.
func TestClientCancel(t *testing.T) {
	s := startServer(t, serverConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(testSchema()), ipc.WithAllocator(s.mem))
	defer w.Close()
	w.SetFlightDescriptor(pathDesc("events"))
	rec := s.record(3)
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	testpoll.Until(t, "the canceled stream to be aborted", func() bool {
		return s.metric("quiver_commits_total", map[string]string{"endpoint": "events", "result": "aborted"}) == 1
	})
	sink := s.sinks["events"]
	if sink.Committed().Rows != 0 || sink.OpenKeys() != 0 {
		t.Fatalf("after cancel: committed %+v, %d keys staged", sink.Committed(), sink.OpenKeys())
	}
}

func TestSchemaChangeMidStream(t *testing.T) {
	s := startServer(t, serverConfig{})
	stream, err := s.client.DoPut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first := flight.NewRecordWriter(stream, ipc.WithSchema(testSchema()), ipc.WithAllocator(s.mem))
	first.SetFlightDescriptor(pathDesc("events"))
	rec := s.record(3)
	if err := first.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()

	// A second IPC writer on the same stream sends a new schema message.
	changed := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(s.mem, changed)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.Int32Builder).Append(1)
	other := b.NewRecordBatch()
	b.Release()
	second := flight.NewRecordWriter(stream, ipc.WithSchema(changed), ipc.WithAllocator(s.mem))
	_ = second.Write(other)
	other.Release()
	_ = second.Close()
	_ = first.Close()
	_ = stream.CloseSend()

	_, err = recvAcks(stream)
	wantCode(t, err, codes.InvalidArgument, "schema changed mid-stream", `"name"`, "int32")
	sink := s.sinks["events"]
	if sink.Committed().Rows != 0 || sink.OpenKeys() != 0 {
		t.Fatalf("after the rejected stream: committed %+v, %d keys staged", sink.Committed(), sink.OpenKeys())
	}
}

// slowWriter takes delay over every Write.
type slowWriter struct {
	writers.Writer
	delay time.Duration
}

func (w slowWriter) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	time.Sleep(w.delay) // a slow sink, not a wait for readiness
	return w.Writer.Write(ctx, key, rec)
}

// A client that waits for each batch's ack before it sends the next is
// not idle while the sink is slow: limits.stream_idle_timeout runs only
// while no batch awaits its ack.
func TestIdleTimeoutSparesClientsWaitingForAcks(t *testing.T) {
	const idle = 100 * time.Millisecond
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": slowWriter{discard.New(nil), 5 * idle}}, idle: idle})
	stream, err := s.client.DoPut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rec := s.record(2)
	defer rec.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(pathDesc("events"))
	for i := range 2 {
		if err := w.Write(rec); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if _, err := stream.Recv(); err != nil { // its ack, after the slow write
			t.Fatalf("ack of batch %d: %v", i, err)
		}
	}
	w.Close()
	_ = stream.CloseSend()
	acks, err := recvAcks(stream)
	if err != nil {
		t.Fatalf("the stream was cut off: %v", err)
	}
	if last := acks[len(acks)-1]; !strings.Contains(last, `"rows":4`) {
		t.Fatalf("final ack %s, want 4 rows committed", last)
	}
}

// A replay of a committed epoch is compared with it by the rows' digest:
// the same rows in other batches and another order replay as usual; as
// many rows with other values are refused under txn.replay_check: refuse
// (two pipelines sharing a writer name), and nothing more is published.
func TestReplayWithOtherRowsIsRefused(t *testing.T) {
	s := startServer(t, serverConfig{txn: txn.Options{ReplayCheck: txn.ReplayRefuse}})
	if _, err := s.put(t.Context(), txnDesc("events", "q", 1), 4); err != nil {
		t.Fatal(err)
	}
	s.mustAction("precommit", `{"writer":"q","epoch":1}`)
	s.mustAction("commit", `{"writer":"q","epoch":1}`)

	rec := s.record(4)
	defer rec.Release()
	tail, head := rec.NewSlice(2, 4), rec.NewSlice(0, 2)
	defer tail.Release()
	defer head.Release()
	if _, err := s.putRecords(t.Context(), txnDesc("events", "q", 1), testSchema(), tail, head); err != nil {
		t.Fatal(err)
	}
	if com := s.mustAction("commit", `{"writer":"q","epoch":1}`); com["replayed"] != true {
		t.Fatalf("commit of a faithful replay = %v, want replayed", com)
	}

	if _, err := s.put(t.Context(), txnDesc("events", "q", 1), 2, 2); err != nil { // ids 0, 1, 0, 1
		t.Fatal(err)
	}
	_, err := s.action(t.Context(), "commit", `{"writer":"q","epoch":1}`)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "4 rows committed and replayed, but other rows") {
		t.Fatalf("commit of a replay with other rows: %v, want FailedPrecondition naming the digests", err)
	}
	if got := s.sinks["events"].Committed().Rows; got != 4 {
		t.Fatalf("committed %d rows, want still 4", got)
	}
}
