package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSink is a SeqCommitter that keeps rows per key in memory and
// publishes them with the seqs, failing as told.
type fakeSink struct {
	mu        sync.Mutex
	staged    map[writers.TxnKey]int64
	published int64
	commits   int
	seqs      map[string]int64
	// failWrite fails the next failWrites Writes with it; failCommit the
	// next CommitSeqs calls, one error each.
	failWrite  error
	failWrites int
	failCommit []error
	// slow blocks every CommitSeqs until it is closed (nil: never blocks).
	slow chan struct{}
	// unknown makes every CommitSeqs end with an unknown outcome, after
	// publishing (lands) or not; panics makes it panic.
	unknown, lands, panics bool
	// picky sets two kinds of batches apart: of this many rows, and the
	// others; a key takes one kind only (ErrInvalid for the other), as
	// Delta refuses a schema other than the key's.
	picky   int64
	kinds   map[writers.TxnKey]bool
	refused int // batches refused as of another kind
	// entered and gate, when set, make each Write tell entered and wait
	// for gate before it writes.
	entered, gate chan struct{}
}

func newFakeSink() *fakeSink {
	return &fakeSink{staged: map[writers.TxnKey]int64{}, seqs: map[string]int64{}, kinds: map[writers.TxnKey]bool{}}
}

func (f *fakeSink) Open(context.Context) error  { return nil }
func (f *fakeSink) Close(context.Context) error { return nil }
func (f *fakeSink) Write(_ context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	f.mu.Lock()
	entered, gate := f.entered, f.gate
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWrites > 0 {
		f.failWrites--
		return f.failWrite
	}
	if f.picky > 0 {
		kind := rec.NumRows() == f.picky
		if k, ok := f.kinds[key]; ok && k != kind {
			f.refused++
			return writers.Errorf(writers.ErrInvalid, "the streams of the key send different schemas")
		}
		f.kinds[key] = kind
	}
	f.staged[key] += rec.NumRows()
	return nil
}
func (f *fakeSink) Precommit(_ context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	return writers.Descriptor(key.Writer), nil
}
func (f *fakeSink) Commit(context.Context, writers.TxnKey, []writers.Descriptor) (writers.CommitInfo, error) {
	return writers.CommitInfo{}, errors.New("fake: only CommitSeqs")
}
func (f *fakeSink) CommitSeqs(ctx context.Context, key writers.TxnKey, _ []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	if slow != nil {
		select {
		case <-slow:
		case <-ctx.Done():
			return writers.CommitInfo{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panics {
		panic("injected commit panic")
	}
	if f.unknown {
		if f.lands && f.staged[key] > 0 {
			f.published += f.staged[key]
			delete(f.staged, key)
			for _, s := range seqs {
				f.seqs[s.Writer] = s.Last
			}
			f.commits++
		}
		return writers.CommitInfo{}, writers.Errorf(writers.ErrOutcomeUnknown, "the answer was lost")
	}
	replayed, err := writers.SeqsState(seqs, func(w string) (int64, bool) { v, ok := f.seqs[w]; return v, ok })
	if err != nil || replayed {
		return writers.CommitInfo{Version: int64(f.commits), Replayed: replayed}, err
	}
	var fail error
	if len(f.failCommit) > 0 {
		fail, f.failCommit = f.failCommit[0], f.failCommit[1:]
	}
	if fail != nil && !errors.Is(fail, writers.ErrOutcomeUnknown) {
		return writers.CommitInfo{}, fail
	}
	// An unknown outcome here is a commit that landed but whose answer
	// was lost.
	f.published += f.staged[key]
	delete(f.staged, key)
	for _, s := range seqs {
		f.seqs[s.Writer] = s.Last
	}
	f.commits++
	return writers.CommitInfo{Version: int64(f.commits)}, fail
}
func (f *fakeSink) Rollback(_ context.Context, key writers.TxnKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.staged, key)
	return nil
}
func (f *fakeSink) CommittedEpoch(_ context.Context, writer string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.seqs[writer]
	return v, ok, nil
}
func (f *fakeSink) Contract() writers.Contract  { return writers.Contract{} }
func (f *fakeSink) Check(context.Context) error { return nil }
func (f *fakeSink) state() (published int64, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.published, f.commits
}

func newCommitter(t *testing.T, sink *fakeSink, interval time.Duration, bytes int64) *Committer {
	t.Helper()
	c, err := New(Options{Endpoint: "e", Writer: sink, Config: writers.GroupCommit{CommitInterval: interval, CommitBytes: bytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func batch(rows int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(rows))
}

func write(t *testing.T, s *Stream, rows int, seq int64) (dropped bool, err error) {
	t.Helper()
	rec := batch(rows)
	defer rec.Release()
	return s.Write(t.Context(), rec, seq, int64(rows)*8)
}

// awaitAck waits for s's next ack.
func awaitAck(t *testing.T, s *Stream) (Ack, error) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-s.Ready():
			ack, ok, err := s.Take()
			if err != nil || ok {
				return ack, err
			}
		case <-deadline:
			t.Fatal("no ack within 10s")
		}
	}
}

func TestGroupCommitPublishesAndDeduplicates(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	s, d, err := c.Open(t.Context(), "w")
	if err != nil || d != NoSeq {
		t.Fatalf("open: %d %v", d, err)
	}
	for seq := range int64(3) {
		if _, err := write(t, s, 10, seq); err != nil {
			t.Fatal(err)
		}
	}
	var ack Ack
	for ack.DurableSeq < 2 {
		if ack, err = awaitAck(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := write(t, s, 10, 1); err == nil || !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("a seq going back: %v, want ErrInvalid", err)
	}
	if last, err := s.Close(t.Context()); err != nil || last.DurableSeq != 2 {
		t.Fatalf("close: %+v %v", last, err)
	}
	// Reopened, the writer resumes at 2: resent seqs are dropped.
	s, d, err = c.Open(t.Context(), "w")
	if err != nil || d != 2 {
		t.Fatalf("reopen: %d %v", d, err)
	}
	if dropped, err := write(t, s, 10, 2); !dropped || err != nil {
		t.Fatalf("replayed seq: dropped %v, %v", dropped, err)
	}
	if _, err := write(t, s, 10, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, s, 10, 1); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("a replayed seq after a new one: %v, want ErrInvalid", err)
	}
	if last, err := s.Close(t.Context()); err != nil || last.DurableSeq != 3 {
		t.Fatalf("close: %+v %v", last, err)
	}
	if published, _ := sink.state(); published != 40 {
		t.Fatalf("published %d rows, want 40", published)
	}
	// Writers without streams or waiting rows are forgotten; the next
	// stream reads the durable seq from the sink.
	c.mu.Lock()
	known := len(c.writers)
	c.mu.Unlock()
	if known != 0 {
		t.Fatalf("%d writers remembered after their streams closed, want 0", known)
	}
	if _, d, err := c.Open(t.Context(), "w"); err != nil || d != 3 {
		t.Fatalf("reopen after forgetting: %d %v, want 3", d, err)
	}
}

// TestGroupCommitFailureFailsItsStreams: a failed commit fails the
// streams whose rows it held; the next group, holding later rows of the
// same writer, is not published (that would skip the lost seqs); a
// reopened stream resumes from the durable seq.
func TestGroupCommitFailureFailsItsStreams(t *testing.T) {
	sink, c, s := failingCommit(t)
	// Group 1 is committing: seq 1 goes into group 2.
	if _, err := write(t, s, 10, 1); err != nil {
		t.Fatal(err)
	}
	close(sink.slow)
	if _, err := awaitAck(t, s); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("the stream of a failed group: %v, want ErrUnavailable", err)
	}
	s = reopenUnpublished(t, sink, c, s)
	if _, err := write(t, s, 10, 0); err != nil {
		t.Fatal(err)
	}
	if last, err := s.Close(t.Context()); err != nil || last.DurableSeq != 0 {
		t.Fatalf("close: %+v %v", last, err)
	}
}

// failingCommit returns a committer whose stream of writer "w" wrote seq 0
// into group 1, which is committing (sink.slow holds it) and will fail
// once sink.slow is closed.
func failingCommit(t *testing.T) (*fakeSink, *Committer, *Stream) {
	t.Helper()
	sink := newFakeSink()
	sink.slow = make(chan struct{})
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	s, _, err := c.Open(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, s, 10, 0); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, "a group commit under way", committing(c))
	sink.mu.Lock()
	sink.failCommit = []error{writers.Errorf(writers.ErrConflict, "boom")}
	sink.mu.Unlock()
	return sink, c, s
}

// reopenUnpublished abandons s and opens writer "w" again, which must find
// nothing of it published: no durable seq, no row.
func reopenUnpublished(t *testing.T, sink *fakeSink, c *Committer, s *Stream) *Stream {
	t.Helper()
	s.Abandon()
	s, d, err := c.Open(t.Context(), "w")
	if err != nil || d != NoSeq {
		t.Fatalf("reopened at %d (%v), want no durable seq: seq 0 was lost, so no later seq may be published", d, err)
	}
	if published, _ := sink.state(); published != 0 {
		t.Fatalf("published %d rows, want 0", published)
	}
	return s
}

// TestGroupCommitFailureDuringAWrite: a group commit failed while its
// stream's next batch was in the sink's Write, its first into the next
// group. The failure could not poison that group (the stream was not a
// member yet), the batch was recorded after it, and the group published
// seq 1 with seq 0 lost: a reconnected client resumed past it. The group
// is now poisoned and publishes nothing.
func TestGroupCommitFailureDuringAWrite(t *testing.T) {
	sink, c, s := failingCommit(t)
	sink.mu.Lock()
	sink.entered, sink.gate = make(chan struct{}), make(chan struct{})
	sink.mu.Unlock()
	wrote := make(chan error, 1)
	go func() {
		_, err := write(t, s, 10, 1)
		wrote <- err
	}()
	<-sink.entered // seq 1 is in the sink's Write, for group 2
	close(sink.slow)
	testpoll.Until(t, "group 1 failed its stream", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return s.err != nil })
	close(sink.gate)
	if err := <-wrote; !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("the write that outlived its group's failure: %v, want ErrUnavailable", err)
	}
	reopenUnpublished(t, sink, c, s).Abandon()
}

// TestGroupCommitOpenWaitsForPendingRows: a stream that replaces one whose
// rows wait in a group opens once they are durable, at their seq.
func TestGroupCommitOpenWaitsForPendingRows(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, 100*time.Millisecond, writers.MinCommitBytes)
	first, _, _ := c.Open(t.Context(), "w")
	if _, err := write(t, first, 10, 7); err != nil {
		t.Fatal(err)
	}
	second, d, err := c.Open(t.Context(), "w")
	if err != nil || d != 7 {
		t.Fatalf("the second stream opened at %d (%v), want 7: the first's rows are committed first", d, err)
	}
	// The fenced stream is answered its rows' durable ack, then its end.
	if ack, ok, err := first.Take(); err != nil || !ok || ack.DurableSeq != 7 {
		t.Fatalf("fenced stream's last ack: %+v %v %v, want durable seq 7", ack, ok, err)
	}
	if _, _, err := first.Take(); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("fenced stream: %v, want ErrConflict", err)
	}
	if last, err := second.Close(t.Context()); err != nil || last.DurableSeq != 7 {
		t.Fatalf("close: %+v %v", last, err)
	}
}

// TestGroupCommitUnknownOutcomeOneStream: a commit that landed but whose
// answer was lost is tried again when its rows carry seqs, finds them
// recorded and does not publish twice; rows without seq have no replay
// check, so it is not tried again (a first commit landing late and the
// retry would both publish): the stream fails with the unknown outcome.
// Either way the rows are published once.
func TestGroupCommitUnknownOutcomeOneStream(t *testing.T) {
	for _, seq := range []int64{0, NoSeq} {
		sink := newFakeSink()
		sink.failCommit = []error{writers.Errorf(writers.ErrOutcomeUnknown, "lost answer")}
		c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
		s, _, err := c.Open(t.Context(), "w")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := write(t, s, 10, seq); err != nil {
			t.Fatal(err)
		}
		last, err := s.Close(t.Context())
		switch {
		case seq == 0 && (err != nil || last.DurableSeq != 0):
			t.Fatalf("with seqs, close: %+v %v, want durable seq 0", last, err)
		case seq == NoSeq && (!errors.Is(err, writers.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "check the table before sending them again")):
			t.Fatalf("without seqs, close: %v, want an unknown outcome telling to check before resending", err)
		}
		if published, commits := sink.state(); published != 10 || commits != 1 {
			t.Fatalf("seq %d: published %d rows in %d commits, want 10 in 1", seq, published, commits)
		}
	}
}

// mixedGroup commits one group holding 10 rows of a stream with seq 0
// (writer "seq") and 5 rows of a stream without seq (writer "noseq").
func mixedGroup(t *testing.T, sink *fakeSink) (withSeq, without *Stream) {
	t.Helper()
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	withSeq, _, _ = c.Open(t.Context(), "seq")
	without, _, _ = c.Open(t.Context(), "noseq")
	if _, err := write(t, withSeq, 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, without, 5, NoSeq); err != nil {
		t.Fatal(err)
	}
	c.kickNow()
	return withSeq, without
}

// TestGroupCommitUnknownOutcomeMixedGroup: a group holding a stream with
// seqs and one without, whose commit landed but lost its answer, is not
// committed again; the seqs tell it landed (the first stream is acked),
// while the rows without seq are answered as an unknown outcome, not
// "send them again" (they were in the commit that landed).
func TestGroupCommitUnknownOutcomeMixedGroup(t *testing.T) {
	sink := newFakeSink()
	sink.failCommit = []error{writers.Errorf(writers.ErrOutcomeUnknown, "lost answer")}
	withSeq, without := mixedGroup(t, sink)
	if last, err := withSeq.Close(t.Context()); err != nil || last.DurableSeq != 0 {
		t.Fatalf("stream with seqs: %+v %v, want durable seq 0", last, err)
	}
	if _, err := without.Close(t.Context()); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("stream without seqs: %v, want an unknown outcome", err)
	}
	if published, commits := sink.state(); published != 15 || commits != 1 {
		t.Fatalf("published %d rows in %d commits, want 15 in 1", published, commits)
	}
}

// TestGroupCommitUnknownOutcomeSeqsNotYetRecorded: a mixed group whose
// commit lost its answer and whose seqs are not recorded when read right
// after (the store may still be writing it): streams with seqs resume from
// the durable seq (a late landing records their seqs), the rows without
// seq stay an unknown outcome.
func TestGroupCommitUnknownOutcomeSeqsNotYetRecorded(t *testing.T) {
	sink := newFakeSink()
	sink.unknown = true // every commit: answer lost, nothing published
	withSeq, without := mixedGroup(t, sink)
	if _, err := withSeq.Close(t.Context()); !errors.Is(err, writers.ErrUnavailable) || errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("stream with seqs: %v, want Unavailable (resume from the durable seq)", err)
	}
	if _, err := without.Close(t.Context()); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("stream without seqs: %v, want an unknown outcome", err)
	}
}

// TestGroupCommitPanicInCommitIsAnUnknownOutcome: a sink commit that
// panics may have published: its rows without seq are an unknown outcome,
// not rows to send again.
func TestGroupCommitPanicInCommitIsAnUnknownOutcome(t *testing.T) {
	sink := newFakeSink()
	sink.panics = true
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	s, _, _ := c.Open(t.Context(), "w")
	if _, err := write(t, s, 10, NoSeq); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Close(t.Context()); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("close: %v, want an unknown outcome", err)
	}
}

// TestGroupCommitUnknownOutcomeDoesNotSpreadToThePoisonedGroup: only the
// group whose own commit lost its answer answers its rows without seq as
// an unknown outcome; the next group, poisoned by it and rolled back
// without a commit, fails its streams (another writer's too) with
// Unavailable: their rows were not published and must be sent again.
func TestGroupCommitUnknownOutcomeDoesNotSpreadToThePoisonedGroup(t *testing.T) {
	sink := newFakeSink()
	sink.slow = make(chan struct{})
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	a, _, _ := c.Open(t.Context(), "a")
	b, _, _ := c.Open(t.Context(), "b")
	if _, err := write(t, a, 10, NoSeq); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, "a group commit under way", committing(c))
	sink.mu.Lock()
	sink.failCommit = []error{writers.Errorf(writers.ErrOutcomeUnknown, "lost answer")}
	sink.mu.Unlock()
	if _, err := write(t, a, 10, NoSeq); err != nil { // into group 2, which it poisons
		t.Fatal(err)
	}
	if _, err := write(t, b, 5, NoSeq); err != nil {
		t.Fatal(err)
	}
	close(sink.slow)
	if _, err := a.Close(t.Context()); !errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("stream of the group whose answer was lost: %v, want an unknown outcome", err)
	}
	_, err := b.Close(t.Context())
	if !errors.Is(err, writers.ErrUnavailable) || errors.Is(err, writers.ErrOutcomeUnknown) {
		t.Fatalf("stream of the poisoned group: %v, want Unavailable, not an unknown outcome", err)
	}
}

// TestGroupCommitBadBatchFailsOnlyItsStream: a Write refused as invalid
// (nothing staged) in a group other streams share is tried again alone in
// a fresh group: refused again, it fails that stream only; accepted (the
// refusal was the group's: another stream's schema admitted first), the
// stream goes on.
func TestGroupCommitBadBatchFailsOnlyItsStream(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	good, _, _ := c.Open(t.Context(), "good")
	bad, _, _ := c.Open(t.Context(), "bad")
	mixed, _, _ := c.Open(t.Context(), "mixed")
	if _, err := write(t, good, 10, 0); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.failWrite, sink.failWrites = writers.Errorf(writers.ErrInvalid, "a null in a NOT NULL column"), 2
	sink.mu.Unlock()
	if _, err := write(t, bad, 10, 0); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("bad batch: %v", err)
	}
	bad.Abandon()
	if _, err := write(t, good, 10, 1); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.failWrite, sink.failWrites = writers.Errorf(writers.ErrInvalid, "the streams of the key send different schemas"), 1
	sink.mu.Unlock()
	if _, err := write(t, mixed, 10, 0); err != nil {
		t.Fatalf("a batch refused by the group, then accepted alone: %v", err)
	}
	c.kickNow()
	if last, err := good.Close(t.Context()); err != nil || last.DurableSeq != 1 || last.Rows != 20 {
		t.Fatalf("good stream: %+v %v", last, err)
	}
	c.kickNow()
	if last, err := mixed.Close(t.Context()); err != nil || last.DurableSeq != 0 || last.Rows != 10 {
		t.Fatalf("mixed stream: %+v %v", last, err)
	}
	if published, _ := sink.state(); published != 30 {
		t.Fatalf("published %d rows, want 30", published)
	}
}

// refusalsUnderWay sets up a committer whose sink holds every commit
// (sink.slow) with one under way, stream "good" holding seq 0 in it and
// seq 1 in the current group, and the sink refusing its next n Writes as
// invalid (the group's schema).
func refusalsUnderWay(t *testing.T, n int) (*fakeSink, *Committer, *Stream) {
	t.Helper()
	sink := newFakeSink()
	sink.slow = make(chan struct{})
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	good, _, _ := c.Open(t.Context(), "good")
	if _, err := write(t, good, 10, 0); err != nil {
		t.Fatal(err)
	}
	c.kickNow()
	testpoll.Until(t, "a group commit under way", committing(c))
	if _, err := write(t, good, 10, 1); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.failWrite, sink.failWrites = writers.Errorf(writers.ErrInvalid, "the streams of the key send different schemas"), n
	sink.mu.Unlock()
	return sink, c, good
}

// TestGroupCommitRefusedBatchDoesNotStallOthers: a stream whose batch is
// refused in a shared group while a commit is under way waits for a fresh
// group of its own; the other streams write on meanwhile, and the retry
// gets the group after the swap.
func TestGroupCommitRefusedBatchDoesNotStallOthers(t *testing.T) {
	sink, c, good := refusalsUnderWay(t, 1)
	other, _, _ := c.Open(t.Context(), "other")
	retried := make(chan error, 1)
	go func() {
		_, err := write(t, other, 10, 0)
		retried <- err
	}()
	testpoll.Until(t, "the refused stream waits for a group of its own", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Contains(c.lonely, other)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	rec := batch(10)
	defer rec.Release()
	if _, err := good.Write(ctx, rec, 2, 80); err != nil {
		t.Fatalf("a write while another stream waits to be alone and a commit is under way: %v", err)
	}
	close(sink.slow)
	if err := <-retried; err != nil {
		t.Fatalf("the refused batch, written again alone: %v", err)
	}
	c.kickNow()
	if last, err := other.Close(t.Context()); err != nil || last.Rows != 10 {
		t.Fatalf("refused stream: %+v %v", last, err)
	}
	c.kickNow()
	if last, err := good.Close(t.Context()); err != nil || last.DurableSeq != 2 || last.Rows != 30 {
		t.Fatalf("good stream: %+v %v", last, err)
	}
	if published, commits := sink.state(); published != 40 || commits != 3 {
		t.Fatalf("published %d rows in %d commits, want 40 in 3 (the retry's group alone)", published, commits)
	}
}

// TestGroupCommitLonelyTurnPassesOn: a stream fenced while it waits in
// line for a group of its own does not take its turn: the next in line
// gets the fresh group at once, not after another commit.
func TestGroupCommitLonelyTurnPassesOn(t *testing.T) {
	sink, c, _ := refusalsUnderWay(t, 2)
	a, _, _ := c.Open(t.Context(), "a")
	b, _, _ := c.Open(t.Context(), "b")
	lonely := func(want ...*Stream) func() bool {
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return slices.Equal(c.lonely, want)
		}
	}
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := write(t, a, 10, 0); aDone <- err }()
	testpoll.Until(t, "a waits in line", lonely(a))
	go func() { _, err := write(t, b, 10, 0); bDone <- err }()
	testpoll.Until(t, "a and b wait in line", lonely(a, b))
	if _, _, err := c.Open(t.Context(), "a"); err != nil { // fences a
		t.Fatal(err)
	}
	next := make(chan struct{}) // the next publish stays under way
	sink.mu.Lock()
	slow := sink.slow
	sink.slow = next
	sink.mu.Unlock()
	close(slow)
	if err := <-aDone; !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("a, fenced in line: %v", err)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("b, written alone: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b still waits for a commit: the fenced stream took its turn")
	}
	close(next)
}

// TestGroupCommitFencesAndBackpressure: a second stream of a writer fences
// the first; a full group blocks Write while the previous one commits.
func TestGroupCommitFencesAndBackpressure(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, 200*time.Millisecond, writers.MinCommitBytes)
	first, _, _ := c.Open(t.Context(), "w")
	second, _, err := c.Open(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, first, 1, 0); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("fenced stream: %v, want ErrConflict", err)
	}
	sink.slow = make(chan struct{})
	big := writers.MinCommitBytes / 8 // rows of 8 bytes: one full group
	if _, err := write(t, second, int(big), 0); err != nil {
		t.Fatal(err)
	}
	// Group 1 is full and committing (slowly); group 2 fills up.
	testpoll.Until(t, "a group commit under way", committing(c))
	if _, err := write(t, second, int(big), 1); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := write(t, second, 1, 2)
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("a write into a full group returned (%v) while the previous one committed", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(sink.slow)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if last, err := second.Close(t.Context()); err != nil || last.DurableSeq != 2 {
		t.Fatalf("close: %+v %v", last, err)
	}
}

// committing reports whether c is publishing a group.
func committing(c *Committer) func() bool {
	return func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.committing }
}

// TestGroupCommitCloseCommitsFirst: stopping publishes what the streams
// wrote and answers it before it ends them with Unavailable; a Write
// after the last group fails.
func TestGroupCommitCloseCommitsFirst(t *testing.T) {
	sink := newFakeSink()
	sink.slow = make(chan struct{})
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	s, _, _ := c.Open(t.Context(), "w")
	if _, err := write(t, s, 10, 0); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close(t.Context()) }()
	testpoll.Until(t, "the last group commit under way", committing(c))
	c.mu.Lock()
	early := s.err
	c.mu.Unlock()
	if early != nil {
		t.Fatalf("the stream ended (%v) before its rows were committed", early)
	}
	if _, err := write(t, s, 10, 1); !errors.Is(err, writers.ErrUnavailable) || !Stopping(err) || strings.Contains(err.Error(), "was committed") {
		t.Fatalf("a write after the last group: %v, want ErrUnavailable saying the batch was not taken", err)
	}
	close(sink.slow)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if ack, err := awaitAck(t, s); err != nil || ack.DurableSeq != 0 {
		t.Fatalf("the last answer: %+v %v, want durable seq 0", ack, err)
	}
	if _, _, err := s.Take(); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("then: %v, want ErrUnavailable", err)
	}
	if last, err := s.Close(t.Context()); err != nil || last.DurableSeq != 0 {
		t.Fatalf("a client ending its stream as the server stops: %+v %v, want its last ack", last, err)
	}
}

// TestGroupCommitReplayedFailsRowsWithoutSeq: a group whose seqs another
// server already recorded publishes nothing: its streams' seqs are
// durable, but rows sent without seq are not, and their streams fail so
// that their clients resend them.
func TestGroupCommitReplayedFailsRowsWithoutSeq(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	a, _, _ := c.Open(t.Context(), "a")
	b, _, _ := c.Open(t.Context(), "b")
	if _, err := write(t, a, 10, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, b, 5, NoSeq); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.seqs["a"] = 2 // another server committed a's seq 2
	sink.mu.Unlock()
	c.kickNow()
	if ack, err := awaitAck(t, a); err != nil || ack.DurableSeq != 2 {
		t.Fatalf("stream a: %+v %v, want durable seq 2", ack, err)
	}
	if _, err := awaitAck(t, b); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("stream b, rows without seq not published: %v, want ErrUnavailable", err)
	}
	if published, _ := sink.state(); published != 0 {
		t.Fatalf("published %d rows, want 0", published)
	}
}

// TestGroupCommitOpenReadsTheSink: a stream opens at the durable seq the
// sink records, also when another server advanced it since this one last
// committed for the writer.
func TestGroupCommitOpenReadsTheSink(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	s, _, _ := c.Open(t.Context(), "w")
	if _, err := write(t, s, 10, 0); err != nil {
		t.Fatal(err)
	}
	s2, d, err := c.Open(t.Context(), "w") // fences s once its rows are durable
	if err != nil || d != 0 {
		t.Fatalf("reopen: %d %v", d, err)
	}
	sink.mu.Lock()
	sink.seqs["w"] = 9 // the writer went on on another server
	sink.mu.Unlock()
	s2.Abandon()
	if _, d, err := c.Open(t.Context(), "w"); err != nil || d != 9 {
		t.Fatalf("reopen after another server committed: %d %v, want 9", d, err)
	}
}

// TestGroupCommitSettlesAnUnknownOutcome: a commit whose outcome stays
// unknown through every retry is settled by the seqs the sink records:
// recorded, its streams are answered durable; not, it is rolled back and
// they fail (Unavailable) to resend.
func TestGroupCommitSettlesAnUnknownOutcome(t *testing.T) {
	for _, lands := range []bool{true, false} {
		t.Run(map[bool]string{true: "landed", false: "lost"}[lands], func(t *testing.T) {
			sink := newFakeSink()
			sink.unknown, sink.lands = true, lands
			c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
			s, _, _ := c.Open(t.Context(), "w")
			if _, err := write(t, s, 10, 0); err != nil {
				t.Fatal(err)
			}
			ack, err := awaitAck(t, s)
			switch {
			case lands && (err != nil || ack.DurableSeq != 0):
				t.Fatalf("landed: %+v %v, want durable seq 0", ack, err)
			case !lands && !errors.Is(err, writers.ErrUnavailable):
				t.Fatalf("lost: %v, want ErrUnavailable", err)
			}
			sink.mu.Lock()
			staged := len(sink.staged)
			sink.mu.Unlock()
			if staged != 0 {
				t.Fatalf("%d keys still staged: the lost group was not rolled back", staged)
			}
		})
	}
}

// TestGroupCommitUnknownOutcomeNeedsEverySeq: an unknown outcome whose
// group's first writer another server advanced, but not the others, did
// not land: its streams fail (Unavailable) rather than being answered
// durable.
func TestGroupCommitUnknownOutcomeNeedsEverySeq(t *testing.T) {
	sink := newFakeSink()
	sink.unknown = true
	c := newCommitter(t, sink, time.Hour, writers.MinCommitBytes)
	a, _, _ := c.Open(t.Context(), "a")
	b, _, _ := c.Open(t.Context(), "b")
	if _, err := write(t, a, 10, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, b, 10, 0); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.seqs["a"] = 0 // another server committed a's seq 0
	sink.mu.Unlock()
	c.kickNow()
	if _, err := awaitAck(t, b); !errors.Is(err, writers.ErrUnavailable) {
		t.Fatalf("stream b of a group that did not land: %v, want ErrUnavailable", err)
	}
}

// TestGroupCommitRetryIsAlone: two streams whose batches the sink never
// takes in one key (two schemas) keep writing at once: each batch refused
// in a shared group is written again in a group of its own, never refused
// twice.
func TestGroupCommitRetryIsAlone(t *testing.T) {
	sink := newFakeSink()
	sink.picky = 7
	c := newCommitter(t, sink, 20*time.Millisecond, writers.MinCommitBytes)
	x, _, _ := c.Open(t.Context(), "x")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		y, _, _ := c.Open(t.Context(), fmt.Sprint("y", i))
		wg.Go(func() {
			for seq := int64(0); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := write(t, y, 10, seq); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	var failed error
	y, _, _ := c.Open(t.Context(), "y")
	for seq := range int64(50) {
		// A batch of the other kind first: x's is refused in that group.
		if _, err := write(t, y, 10, seq); err != nil {
			failed = err
			break
		}
		if _, err := write(t, x, 7, seq); err != nil {
			failed = fmt.Errorf("batch %d of x, valid alone: %w", seq, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if err := errors.Join(append(errs, failed)...); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	refused := sink.refused
	sink.mu.Unlock()
	t.Logf("%d batches refused in a shared group and written again alone", refused)
	if refused == 0 {
		t.Fatal("no batch was refused: the test did not mix the kinds")
	}
}

// TestGroupCommitNoAckForNothingDurable: a group commit that made nothing
// of a stream durable (its only batch was empty and without seq, as a
// client's opening schema batch is) sends it no answer; the next commit's
// answer carries the seq it made durable.
func TestGroupCommitNoAckForNothingDurable(t *testing.T) {
	sink := newFakeSink()
	c := newCommitter(t, sink, 10*time.Millisecond, writers.MinCommitBytes)
	s, _, err := c.Open(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, s, 0, NoSeq); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	g := s.lastGroup
	c.mu.Unlock()
	if g == nil {
		t.Fatal("the empty batch joined no group")
	}
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the empty batch's group did not commit within 10s")
	}
	if ack, ok, err := s.Take(); ok || err != nil {
		t.Fatalf("answer %+v, %v after a commit that made nothing of the stream durable, want none", ack, err)
	}
	if _, err := write(t, s, 10, 0); err != nil {
		t.Fatal(err)
	}
	if ack, err := awaitAck(t, s); err != nil || ack.DurableSeq != 0 || ack.Rows != 10 {
		t.Fatalf("answer %+v, %v; want seq 0 durable with 10 rows", ack, err)
	}
}
