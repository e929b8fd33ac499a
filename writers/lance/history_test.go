package lance

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// TestHistoryReadsOnlyExistingVersions: a fresh writer finds an epoch
// across a gap in the version numbers (what a vacuum leaves) by reading
// the versions that exist, not by probing every missing number: across a
// gap of 2^40 probing would never end.
func TestHistoryReadsOnlyExistingVersions(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(ctx)
	r := scenarioRows(mem, 0, 5)
	commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 1}, r) // version 1
	r.Release()
	base, err := lancetable.Latest(ctx, w.bucket)
	if err != nil {
		t.Fatal(err)
	}
	base.Manifest.Version = 1 << 40 // the next version is 2^40+1
	if _, err := lancetable.Commit(ctx, w.bucket, base, &lancetable.Transaction{Op: lancetable.OpAppend}); err != nil {
		t.Fatal(err)
	}

	fresh := newWriter(t, dir, mem)
	defer fresh.Close(ctx)
	type answer struct {
		epoch int64
		ok    bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		e, ok, err := fresh.CommittedEpoch(ctx, "job")
		done <- answer{e, ok, err}
	}()
	select {
	case a := <-done:
		if a.err != nil || !a.ok || a.epoch != 1 {
			t.Fatalf("CommittedEpoch = %+v; want epoch 1", a)
		}
	case <-time.After(time.Minute):
		t.Fatal("CommittedEpoch still running after a minute: it probes every missing version number")
	}
}

// TestVacuumForgetsIdleWriters: vacuum keeps the version holding a
// writer's newest epoch only while younger than UntrackedMinAge (the
// longest a transaction may stay open): one-off writers, as Flight SQL's
// one per transaction, then pin no old version forever, and their epochs
// are forgotten by the running writer as by a fresh one.
func TestVacuumForgetsIdleWriters(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	_, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(ctx)
	for i, key := range []writers.TxnKey{{Writer: "sql-a", Epoch: 1}, {Writer: "sql-b", Epoch: 1}, writers.AutoKey("c")} {
		r := scenarioRows(mem, i*5, i*5+5)
		commitRows(t, w, key, r) // versions 1-3
		r.Release()
	}
	if res, err := w.Vacuum(ctx, writers.VacuumRequest{UntrackedMinAge: time.Hour}); err != nil || res.LogFilesDeleted != 0 {
		t.Fatalf("vacuum within UntrackedMinAge = %+v, %v; want versions 1 and 2 kept for their epochs", res, err)
	}
	if res, err := w.Vacuum(ctx, writers.VacuumRequest{}); err != nil || res.LogFilesDeleted != 2 {
		t.Fatalf("vacuum past UntrackedMinAge = %+v, %v; want versions 1 and 2 removed", res, err)
	}
	fresh := newWriter(t, dir, mem)
	defer fresh.Close(ctx)
	for _, w := range []*Writer{w, fresh} {
		if e, ok, err := w.CommittedEpoch(ctx, "sql-a"); err != nil || ok {
			t.Fatalf("CommittedEpoch(sql-a) = %d, %v, %v; want forgotten", e, ok, err)
		}
	}
	if n := published(t, fresh); n != 15 {
		t.Fatalf("%d rows after vacuum, want 15", n)
	}
}
