// Package writertest is the conformance suite of the writers.Writer
// contract. Every sink runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		writertest.Run(t, writertest.Harness{New: ..., Published: ...})
//	}
//
// The suite covers auto-commit, transactions, idempotent commit, rollback,
// replayed epochs, aggregated descriptors, restart (with Harness.Peer),
// schema mismatch (for SchemaReporter writers), a rolled-back first stream
// (it must leave no table and no schema behind), concurrent first commits
// (with Harness.Peer), CommittedEpoch and Arrow memory leaks. It imports
// only the writers contract, Arrow and testing; a table sink runs it on
// local and emulated cloud storage through package tabletest.
package writertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Harness connects the suite to one sink.
type Harness struct {
	// New returns an opened writer over fresh, empty sink storage that
	// accepts records of [Schema]. mem is the suite's checked allocator;
	// the writer should allocate from it so leaks are caught. The suite
	// closes the writer. Required.
	New func(t *testing.T, mem memory.Allocator) writers.Writer
	// Published returns the number of rows a reader of w's sink sees now.
	// Required.
	Published func(t *testing.T, w writers.Writer) int64
	// Peer returns another opened writer over the same sink storage as w:
	// what a restarted server, or a second server writing the same table,
	// sees (restart, aggregation across servers, concurrent first
	// commits). The suite closes it. Required.
	Peer func(t *testing.T, w writers.Writer) writers.Writer
	// FixedSchema declares that the endpoint's schema is configured (New
	// returns a writer reporting [Schema] before any stream) rather than
	// defined by the first stream that commits. The first-stream subtest
	// then checks that a rolled-back stream leaves the configured schema
	// and that a stream of another schema is still refused, instead of
	// checking that such a stream defines the endpoint's schema.
	FixedSchema bool
	// TableSchema declares that the sink storage holds one schema, which
	// the first commit defines (a table, a dataset): of two first commits
	// of different schemas racing, one creates it and the other is refused
	// with ErrInvalid and publishes nothing. Such a sink's precommits write
	// files, which it must delete on request (writers.PrecommitDiscarder),
	// and it takes continuous streams (writers.SeqCommitter) safely across
	// servers: two group commits racing with the same seqs publish once.
	TableSchema bool
}

// Schema is the schema of the records the suite writes: id int64 (not
// null), name utf8.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// Run runs every conformance subtest against h.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Published == nil || h.Peer == nil {
		t.Fatal("writertest: Harness.New, Harness.Published and Harness.Peer are required")
	}
	subtests := []struct {
		name string
		run  func(*suite)
	}{
		{"auto-commit", (*suite).autoCommit},
		{"transaction", (*suite).transaction},
		{"idempotent-commit", (*suite).idempotentCommit},
		{"repeated-precommit", (*suite).repeatedPrecommit},
		{"rollback", (*suite).rollbackDiscards},
		{"empty-precommit", (*suite).emptyPrecommit},
		{"empty-first-epoch", (*suite).emptyFirstEpoch},
		{"replayed-epoch", (*suite).replayedEpoch},
		{"aggregated-descriptors", (*suite).aggregatedDescriptors},
		{"restart", (*suite).restart},
		{"schema-mismatch", (*suite).schemaMismatch},
		{"rolled-back-first-stream", (*suite).rolledBackFirstStream},
		{"concurrent-first-commits", (*suite).concurrentFirstCommits},
		{"never-committed", (*suite).neverCommitted},
		{"concurrent-keys", (*suite).concurrentKeys},
	}
	if h.TableSchema {
		subtests = append(subtests, []struct {
			name string
			run  func(*suite)
		}{
			{"concurrent-first-commits-of-two-schemas", (*suite).concurrentFirstCommitsOfTwoSchemas},
			{"discard-precommitted", (*suite).discardPrecommitted},
			{"seqs-across-servers", (*suite).seqsAcrossServers},
		}...)
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			// Cleanups run last-in first-out: the writers close before the
			// allocator is checked.
			t.Cleanup(func() { mem.AssertSize(t, 0) })
			s := &suite{t: t, h: h, mem: mem, ctx: context.Background()}
			s.w = s.open(h.New(t, mem))
			st.run(s)
		})
	}
}

type suite struct {
	t   *testing.T
	h   Harness
	mem memory.Allocator
	ctx context.Context
	w   writers.Writer
}

func (s *suite) open(w writers.Writer) writers.Writer {
	s.t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			s.t.Errorf("Close: %v", err)
		}
	})
	return w
}

// write writes batches of the given sizes under key with w and returns the
// rows written.
func (s *suite) write(w writers.Writer, key writers.TxnKey, sizes ...int) int64 {
	s.t.Helper()
	var total int64
	for _, n := range sizes {
		rec := s.record(int(total), n)
		err := w.Write(s.ctx, key, rec)
		rec.Release() // records are borrowed by Write
		if err != nil {
			s.t.Fatalf("Write(%s): %v", key, err)
		}
		total += int64(n)
	}
	return total
}

func (s *suite) record(start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(s.mem, Schema())
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.StringBuilder)
	for i := start; i < start+n; i++ {
		ids.Append(int64(i))
		if i%3 == 0 {
			names.AppendNull()
		} else {
			names.Append(fmt.Sprintf("name-%d", i))
		}
	}
	return b.NewRecordBatch()
}

func (s *suite) precommit(w writers.Writer, key writers.TxnKey) writers.Descriptor {
	s.t.Helper()
	d, err := w.Precommit(s.ctx, key)
	if err != nil {
		s.t.Fatalf("Precommit(%s): %v", key, err)
	}
	return d
}

func (s *suite) commit(w writers.Writer, key writers.TxnKey, descs ...writers.Descriptor) writers.CommitInfo {
	s.t.Helper()
	info, err := w.Commit(s.ctx, key, descs)
	if err != nil {
		s.t.Fatalf("Commit(%s): %v", key, err)
	}
	return info
}

func (s *suite) rollback(w writers.Writer, key writers.TxnKey) {
	s.t.Helper()
	if err := w.Rollback(s.ctx, key); err != nil {
		s.t.Fatalf("Rollback(%s): %v", key, err)
	}
}

func (s *suite) wantPublished(want int64, when string) {
	s.t.Helper()
	if got := s.h.Published(s.t, s.w); got != want {
		s.t.Fatalf("%s: %d rows published, want %d", when, got, want)
	}
}

func (s *suite) wantEpoch(w writers.Writer, writer string, want int64, wantOK bool) {
	s.t.Helper()
	got, ok, err := w.CommittedEpoch(s.ctx, writer)
	switch {
	case err != nil:
		s.t.Fatalf("CommittedEpoch(%q): %v", writer, err)
	case ok != wantOK:
		s.t.Fatalf("CommittedEpoch(%q): ok = %v, want %v", writer, ok, wantOK)
	case ok && got != want:
		s.t.Fatalf("CommittedEpoch(%q) = %d, want %d", writer, got, want)
	}
}

func (s *suite) autoCommit() {
	key := writers.AutoKey("stream-1")
	rows := s.write(s.w, key, 3, 5)
	s.wantPublished(0, "after Write")
	d := s.precommit(s.w, key)
	s.wantPublished(0, "after Precommit")
	if info := s.commit(s.w, key, d); info.Replayed {
		s.t.Fatal("first Commit of an auto-commit key reported Replayed")
	}
	s.wantPublished(rows, "after Commit")
	// Auto-commit keys are private: they must not show up as epochs.
	s.wantEpoch(s.w, key.Writer, 0, false)
}

func (s *suite) transaction() {
	key := writers.TxnKey{Writer: "job-1", Epoch: 7}
	rows := s.write(s.w, key, 4)
	rows += s.write(s.w, key, 6)
	d := s.precommit(s.w, key)
	s.wantPublished(0, "after Precommit")
	s.wantEpoch(s.w, key.Writer, 0, false)
	s.commit(s.w, key, d)
	s.wantPublished(rows, "after Commit")
	s.wantEpoch(s.w, key.Writer, 7, true)
}

func (s *suite) idempotentCommit() {
	key := writers.TxnKey{Writer: "job-1", Epoch: 1}
	rows := s.write(s.w, key, 5)
	d := s.precommit(s.w, key)
	first := s.commit(s.w, key, d)
	second := s.commit(s.w, key, d)
	if !second.Replayed {
		s.t.Fatal("second Commit of the same key: Replayed = false, want true")
	}
	if second.Version != first.Version {
		s.t.Fatalf("second Commit version %d, want the original %d", second.Version, first.Version)
	}
	s.wantPublished(rows, "after the second Commit")
}

// repeatedPrecommit: a transaction's precommit is retried when another
// participant (or the journal) failed it, so a sink's Precommit runs twice
// for one key; the second descriptor publishes the rows, once.
func (s *suite) repeatedPrecommit() {
	key := writers.TxnKey{Writer: "job-1", Epoch: 1}
	rows := s.write(s.w, key, 5)
	s.precommit(s.w, key)
	d := s.precommit(s.w, key)
	s.commit(s.w, key, d)
	s.wantPublished(rows, "after Commit of the second Precommit's descriptor")
}

func (s *suite) rollbackDiscards() {
	staged := writers.TxnKey{Writer: "job-1", Epoch: 1}
	s.write(s.w, staged, 5)
	s.rollback(s.w, staged)
	s.rollback(s.w, staged) // idempotent
	s.rollback(s.w, writers.TxnKey{Writer: "nobody", Epoch: 3})

	precommitted := writers.TxnKey{Writer: "job-2", Epoch: 1}
	s.write(s.w, precommitted, 5)
	s.precommit(s.w, precommitted)
	s.rollback(s.w, precommitted)

	auto := writers.AutoKey("stream-1")
	s.write(s.w, auto, 2)
	s.rollback(s.w, auto)

	s.wantPublished(0, "after Rollback")
	s.wantEpoch(s.w, staged.Writer, 0, false)
	s.wantEpoch(s.w, precommitted.Writer, 0, false)
}

// discardPrecommitted: a table sink's precommit writes files, so it is a
// writers.PrecommitDiscarder, which deletes what a rolled-back precommit
// wrote and nothing of what is published: the table reads as before, and
// the descriptor no longer commits anywhere (a peer refuses it with
// ErrInvalid, its files are gone). Idempotent.
func (s *suite) discardPrecommitted() {
	d, ok := writers.Find[writers.PrecommitDiscarder](s.w)
	if !ok {
		s.t.Fatal("a table sink must implement writers.PrecommitDiscarder: the files of its rolled-back precommits would stay until vacuum")
	}
	first := writers.TxnKey{Writer: "job-1", Epoch: 1}
	s.write(s.w, first, 5)
	s.commit(s.w, first, s.precommit(s.w, first))
	s.wantPublished(5, "after the first commit")

	rolled := writers.TxnKey{Writer: "job-2", Epoch: 1}
	s.write(s.w, rolled, 5) // the same ids: an upsert endpoint updates them
	desc := s.precommit(s.w, rolled)
	s.rollback(s.w, rolled)
	for range 2 {
		if err := d.DiscardPrecommitted(s.ctx, desc); err != nil {
			s.t.Fatalf("DiscardPrecommitted: %v", err)
		}
	}
	s.wantPublished(5, "after discarding a rolled-back precommit")
	peer := s.open(s.h.Peer(s.t, s.w))
	if _, err := peer.Commit(s.ctx, rolled, []writers.Descriptor{desc}); !errors.Is(err, writers.ErrInvalid) {
		s.t.Fatalf("commit of a discarded precommit's descriptor: %v, want ErrInvalid (its files are gone)", err)
	}
	s.wantPublished(5, "after the refused commit")
}

func (s *suite) emptyPrecommit() {
	// A key with nothing staged (never written, or rolled back) yields a
	// descriptor that publishes nothing but still records the epoch. Before
	// the endpoint's table exists there may be nowhere to record it (see
	// rolledBackFirstStream), so a first stream creates it.
	first := writers.AutoKey("stream-1")
	rows := s.write(s.w, first, 2)
	s.commit(s.w, first, s.precommit(s.w, first))
	key := writers.TxnKey{Writer: "job-1", Epoch: 2}
	s.write(s.w, key, 5)
	s.rollback(s.w, key)
	s.commit(s.w, key, s.precommit(s.w, key))
	s.wantPublished(rows, "after committing an empty descriptor")
	s.wantEpoch(s.w, key.Writer, 2, true)
}

// emptyFirstEpoch: an epoch with no rows on a fresh endpoint (a stream
// that sent its schema and no batch: the server writes one zero-row
// batch) still commits and records the epoch, as checkpointing engines
// commit their empty batches; the endpoint then has the stream's schema,
// and a later epoch with rows commits on it.
func (s *suite) emptyFirstEpoch() {
	key := writers.TxnKey{Writer: "job-1", Epoch: 1}
	s.write(s.w, key, 0)
	s.commit(s.w, key, s.precommit(s.w, key))
	s.wantPublished(0, "after an empty first epoch")
	s.wantEpoch(s.w, key.Writer, 1, true)
	s.wantSchema(s.w, Schema(), "after an empty first epoch")
	next := writers.TxnKey{Writer: "job-1", Epoch: 2}
	rows := s.write(s.w, next, 3)
	s.commit(s.w, next, s.precommit(s.w, next))
	s.wantPublished(rows, "after the next epoch")
	s.wantEpoch(s.w, key.Writer, 2, true)
}

func (s *suite) replayedEpoch() {
	newer := writers.TxnKey{Writer: "job-1", Epoch: 5}
	rows := s.write(s.w, newer, 5)
	s.commit(s.w, newer, s.precommit(s.w, newer))

	for _, epoch := range []int64{5, 3, 0} {
		old := writers.TxnKey{Writer: "job-1", Epoch: epoch}
		s.write(s.w, old, 4)
		info := s.commit(s.w, old, s.precommit(s.w, old))
		if !info.Replayed {
			s.t.Fatalf("Commit of epoch %d after epoch 5 committed: Replayed = false, want true", epoch)
		}
		s.wantPublished(rows, fmt.Sprintf("after replaying epoch %d", epoch))
		s.wantEpoch(s.w, "job-1", 5, true)
	}
}

func (s *suite) aggregatedDescriptors() {
	if !s.w.Contract().AggregatesDescriptors {
		s.t.Skip("the sink does not aggregate descriptors")
	}
	// Two keys of one writer instance, published by one Commit.
	a := writers.TxnKey{Writer: "agg-a", Epoch: 1}
	b := writers.TxnKey{Writer: "agg-b", Epoch: 1}
	rows := s.write(s.w, a, 3) + s.write(s.w, b, 4)
	s.commit(s.w, a, s.precommit(s.w, a), s.precommit(s.w, b))
	s.wantPublished(rows, "after committing two keys' descriptors")

	// Two servers precommit the same transaction; one publishes both, the
	// other's own Commit then finds the epoch committed.
	peer := s.open(s.h.Peer(s.t, s.w))
	key := writers.TxnKey{Writer: "agg-c", Epoch: 9}
	rows += s.write(s.w, key, 5) + s.write(peer, key, 6)
	mine, theirs := s.precommit(s.w, key), s.precommit(peer, key)
	s.commit(s.w, key, mine, theirs)
	s.wantPublished(rows, "after committing a peer's descriptor")
	if info := s.commit(peer, key, theirs); !info.Replayed {
		s.t.Fatal("peer Commit after the aggregated commit: Replayed = false, want true")
	}
	s.wantPublished(rows, "after the peer's replayed Commit")
	s.wantEpoch(peer, key.Writer, 9, true)
}

func (s *suite) restart() {
	key := writers.TxnKey{Writer: "job-1", Epoch: 3}
	rows := s.write(s.w, key, 5)
	d := s.precommit(s.w, key)
	restarted := s.open(s.h.Peer(s.t, s.w))
	if err := s.w.Close(s.ctx); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
	s.commit(restarted, key, d)
	s.wantPublished(rows, "after committing a precommitted descriptor after a restart")
	s.wantEpoch(restarted, key.Writer, 3, true)
	if info := s.commit(restarted, key, d); !info.Replayed {
		s.t.Fatal("second Commit after restart: Replayed = false, want true")
	}
	s.wantPublished(rows, "after the second Commit")
}

func (s *suite) schemaMismatch() {
	// Schemas are known once a table exists: commit one batch first.
	first := writers.AutoKey("stream-1")
	rows := s.write(s.w, first, 2)
	s.commit(s.w, first, s.precommit(s.w, first))
	schema, err := writers.SchemaOf(s.ctx, s.w)
	if err != nil {
		s.t.Fatalf("Schema: %v", err)
	}
	if schema == nil {
		s.t.Skip("the writer reports no schema")
	}

	b := array.NewRecordBuilder(s.mem, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
	}, nil))
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("not-an-int")
	rec := b.NewRecordBatch()
	defer rec.Release()

	key := writers.AutoKey("stream-2")
	err = s.w.Write(s.ctx, key, rec)
	if !errors.Is(err, writers.ErrInvalid) {
		s.t.Fatalf("Write of a mismatched record: %v, want an ErrInvalid error", err)
	}
	s.commit(s.w, key, s.precommit(s.w, key))
	s.wantPublished(rows, "after the rejected Write")
}

// otherSchema is a schema unlike [Schema]: what a second, unrelated
// producer might send to a fresh endpoint.
func otherSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
}

// otherRecord returns n rows of otherSchema.
func (s *suite) otherRecord(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(s.mem, otherSchema())
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("key-%d", i))
		b.Field(1).(*array.Float64Builder).Append(float64(i) / 2)
	}
	return b.NewRecordBatch()
}

// wantSchema checks the schema w reports: none when want is nil, else
// want's columns, or none from a writer that never reports one.
func (s *suite) wantSchema(w writers.Writer, want *arrow.Schema, when string) {
	s.t.Helper()
	got, err := writers.SchemaOf(s.ctx, w)
	switch {
	case err != nil:
		s.t.Fatalf("%s: Schema: %v", when, err)
	case want == nil && got != nil:
		s.t.Fatalf("%s: the endpoint reports schema [%s], want none: a table is created by the commit that publishes its first rows, never by a write", when, writers.FieldList(got))
	case want != nil && got != nil && writers.SchemaMismatch(want, got) != "":
		s.t.Fatalf("%s: the endpoint reports schema [%s], want [%s]: %s", when, writers.FieldList(got), writers.FieldList(want), writers.SchemaMismatch(want, got))
	}
}

// rolledBackFirstStream: the first stream to a fresh endpoint, rolled back
// (staged, or precommitted), leaves nothing: no rows, no table and no
// schema, and the endpoint reports no schema while it is staged. A stream
// with another schema then commits and its schema is the endpoint's only
// one. An endpoint with a configured schema (Harness.FixedSchema) keeps
// it and still refuses another schema.
func (s *suite) rolledBackFirstStream() {
	var fixed *arrow.Schema
	if s.h.FixedSchema {
		fixed = Schema()
		if got, err := writers.SchemaOf(s.ctx, s.w); err != nil || got == nil {
			s.t.Fatalf("Harness.FixedSchema is set but the writer reports schema %v (%v)", got, err)
		}
	}
	s.wantSchema(s.w, fixed, "on a fresh endpoint")
	staged := writers.TxnKey{Writer: "first", Epoch: 1}
	s.write(s.w, staged, 3)
	s.wantSchema(s.w, fixed, "while the first stream is staged")
	precommitted := writers.TxnKey{Writer: "second", Epoch: 1}
	s.write(s.w, precommitted, 4)
	s.precommit(s.w, precommitted)
	s.wantSchema(s.w, fixed, "while the first streams are precommitted")
	s.rollback(s.w, staged)
	s.rollback(s.w, precommitted)
	s.wantSchema(s.w, fixed, "after rolling the first streams back")
	s.wantPublished(0, "after rolling the first streams back")
	// The rolled-back transactions commit nothing (their rows are gone).
	s.commit(s.w, precommitted, s.precommit(s.w, precommitted))
	s.wantSchema(s.w, fixed, "after committing a rolled-back transaction")
	s.wantPublished(0, "after committing a rolled-back transaction")

	rec := s.otherRecord(5)
	defer rec.Release()
	key := writers.AutoKey("other")
	if s.h.FixedSchema {
		if err := s.w.Write(s.ctx, key, rec); !errors.Is(err, writers.ErrInvalid) {
			s.t.Fatalf("Write of another schema than the configured one: %v, want an ErrInvalid error", err)
		}
		rows := s.write(s.w, key, 2)
		s.commit(s.w, key, s.precommit(s.w, key))
		s.wantPublished(rows, "after a stream of the configured schema")
		s.wantSchema(s.w, fixed, "after a stream of the configured schema")
		return
	}
	if err := s.w.Write(s.ctx, key, rec); err != nil {
		s.t.Fatalf("Write of another schema after the first stream was rolled back: %v", err)
	}
	s.commit(s.w, key, s.precommit(s.w, key))
	s.wantPublished(5, "after a stream of another schema")
	got, err := writers.SchemaOf(s.ctx, s.w)
	if err != nil {
		s.t.Fatalf("Schema: %v", err)
	}
	if got != nil && writers.SchemaMismatch(otherSchema(), got) != "" {
		s.t.Fatalf("after the only committed stream, of schema [%s], the endpoint reports [%s]", writers.FieldList(otherSchema()), writers.FieldList(got))
	}
}

// concurrentFirstCommits: two servers (the writer and its peer) commit the
// first streams of a fresh endpoint, of one schema, at the same time: one
// creates the table, the other appends to it (after losing the race, a
// sink rebases), and both commits stand.
func (s *suite) concurrentFirstCommits() {
	peer := s.open(s.h.Peer(s.t, s.w))
	ws := []writers.Writer{s.w, peer}
	keys := []writers.TxnKey{{Writer: "first-a", Epoch: 1}, {Writer: "first-b", Epoch: 1}}
	descs := make([]writers.Descriptor, len(ws))
	var rows int64
	for i, w := range ws {
		rows += s.write(w, keys[i], 3+i)
		descs[i] = s.precommit(w, keys[i])
	}
	errs := s.commitAtOnce(ws, keys, descs)
	if err := errors.Join(errs...); err != nil {
		s.t.Fatalf("concurrent first commits of one schema: %v", err)
	}
	s.wantPublished(rows, "after concurrent first commits")
	for i, w := range ws {
		s.wantEpoch(w, keys[i].Writer, 1, true)
		s.wantEpoch(w, keys[1-i].Writer, 1, true)
	}
	s.wantSchema(s.w, Schema(), "after concurrent first commits")
}

// commitAtOnce commits descs[i] under keys[i] with ws[i], all at once.
func (s *suite) commitAtOnce(ws []writers.Writer, keys []writers.TxnKey, descs []writers.Descriptor) []error {
	errs := make([]error, len(ws))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			<-start
			_, errs[i] = w.Commit(s.ctx, keys[i], []writers.Descriptor{descs[i]})
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// concurrentFirstCommitsOfTwoSchemas races two first commits of different
// schemas on fresh storage, several times (Harness.TableSchema): one
// creates the table, the other is refused and records nothing.
func (s *suite) concurrentFirstCommitsOfTwoSchemas() {
	for round := range 5 {
		w := s.w
		if round > 0 {
			w = s.open(s.h.New(s.t, s.mem))
		}
		ws := []writers.Writer{w, s.open(s.h.Peer(s.t, w))}
		keys := []writers.TxnKey{{Writer: "a", Epoch: 1}, {Writer: "b", Epoch: 1}}
		recs := []arrow.RecordBatch{s.record(0, 5), s.otherRecord(7)}
		descs := make([]writers.Descriptor, len(ws))
		for i, w := range ws {
			err := w.Write(s.ctx, keys[i], recs[i])
			recs[i].Release()
			if err != nil {
				s.t.Fatalf("Write(%s): %v", keys[i], err)
			}
			descs[i] = s.precommit(w, keys[i])
		}
		errs := s.commitAtOnce(ws, keys, descs)
		winner := 0
		if errs[0] != nil {
			winner = 1
		}
		if errs[winner] != nil || !errors.Is(errs[1-winner], writers.ErrInvalid) {
			s.t.Fatalf("first commits of two schemas: %v; want one to commit and the other refused with ErrInvalid", errs)
		}
		if got, want := s.h.Published(s.t, w), []int64{5, 7}[winner]; got != want {
			s.t.Fatalf("%d rows published, want the winner's %d", got, want)
		}
		s.wantEpoch(ws[1-winner], keys[1-winner].Writer, 0, false)
	}
}

// seqsAcrossServers: a group commit of continuous streams records each
// writer's last seq (CommittedEpoch reads it on every server); the same
// seqs again are a replay and a part of them a conflict, both publishing
// nothing; and two servers racing with the same writer's seq, round after
// round, publish it once (Harness.TableSchema).
func (s *suite) seqsAcrossServers() {
	peer := s.open(s.h.Peer(s.t, s.w))
	group := func(w writers.Writer, name string, rows int, seqs ...writers.WriterSeq) (writers.CommitInfo, error) {
		sc, ok := writers.Find[writers.SeqCommitter](w)
		if !ok {
			s.t.Fatal("a table sink must take continuous streams (writers.SeqCommitter)")
		}
		key := writers.AutoKey(name)
		s.write(w, key, rows)
		info, err := sc.CommitSeqs(s.ctx, key, []writers.Descriptor{s.precommit(w, key)}, seqs)
		if err != nil || info.Replayed {
			s.rollback(w, key)
		}
		return info, err
	}
	if _, err := group(s.w, "g1", 5, writers.WriterSeq{Writer: "c1", First: 0, Last: 2}, writers.WriterSeq{Writer: "c2", First: 0, Last: 0}); err != nil {
		s.t.Fatalf("group commit: %v", err)
	}
	s.wantPublished(5, "after a group commit")
	for _, w := range []writers.Writer{s.w, peer} {
		s.wantEpoch(w, "c1", 2, true)
		s.wantEpoch(w, "c2", 0, true)
	}
	if info, err := group(peer, "g2", 4, writers.WriterSeq{Writer: "c1", First: 0, Last: 2}, writers.WriterSeq{Writer: "c2", First: 0, Last: 0}); err != nil || !info.Replayed {
		s.t.Fatalf("the same seqs again: %+v %v, want Replayed", info, err)
	}
	if _, err := group(peer, "g3", 4, writers.WriterSeq{Writer: "c1", First: 2, Last: 4}); !errors.Is(err, writers.ErrConflict) {
		s.t.Fatalf("seqs partly recorded: %v, want ErrConflict", err)
	}
	s.wantPublished(5, "after a replayed and a conflicting group")

	const rounds = 10
	for i := range rounds {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, w := range []writers.Writer{s.w, peer} {
			wg.Go(func() {
				_, err := group(w, fmt.Sprintf("race-%d-%d", i, j), 1, writers.WriterSeq{Writer: fmt.Sprint("s", i), First: 0, Last: 0})
				if !errors.Is(err, writers.ErrConflict) {
					errs[j] = err
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			s.t.Fatalf("round %d: %v", i, err)
		}
	}
	s.wantPublished(5+rounds, "after two servers raced with the same seqs: each must land once")
}

func (s *suite) neverCommitted() {
	s.wantEpoch(s.w, "never-seen", 0, false)
}

func (s *suite) concurrentKeys() {
	const streams = 4
	var (
		wg    sync.WaitGroup
		descs = make([]writers.Descriptor, streams)
		errs  = make([]error, streams)
	)
	key := func(i int) writers.TxnKey { return writers.TxnKey{Writer: fmt.Sprintf("job-%d", i), Epoch: 1} }
	for i := range streams {
		wg.Go(func() {
			for range 3 {
				rec := s.record(0, 10)
				err := s.w.Write(s.ctx, key(i), rec)
				rec.Release()
				if err != nil {
					errs[i] = err
					return
				}
			}
			descs[i], errs[i] = s.w.Precommit(s.ctx, key(i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.t.Fatalf("concurrent writes: %v", err)
	}
	for i, d := range descs {
		s.commit(s.w, key(i), d)
	}
	s.wantPublished(streams*3*10, "after concurrent streams")
}

// ZeroRecord returns n rows of schema, every value the zero value of its
// type, from mem: input for tests about schemas rather than values. The
// caller releases it.
func ZeroRecord(mem memory.Allocator, schema *arrow.Schema, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, f := range b.Fields() {
		f.AppendEmptyValues(n)
	}
	return b.NewRecordBatch()
}
