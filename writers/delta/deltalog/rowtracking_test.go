package deltalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// rowTracked creates a table and turns row tracking on as Spark does
// (protocol 3/7 listing rowTracking and domainMetadata, enableRowTracking
// and the materialized column names), at version 1.
func rowTracked(t *testing.T, store Store, conf map[string]string) *Snapshot {
	t.Helper()
	s0 := create(t, store, nil)
	p := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
		WriterFeatures: []string{"deletionVectors", "domainMetadata", "rowTracking"}}
	m := s0.Metadata
	m.Configuration = map[string]string{"delta.enableRowTracking": "true",
		MaterializedRowIDProperty:            "_row-id-col-x",
		MaterializedRowCommitVersionProperty: "_row-commit-version-col-x"}
	for k, v := range conf {
		m.Configuration[k] = v
	}
	if _, err := Commit(t.Context(), store, s0, []Action{{Protocol: &p}, {MetaData: &m}}, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRowIDs asserts that the live files' row-id ranges are disjoint,
// cover 0..hwm and that every add's defaultRowCommitVersion is the version
// that added it.
func checkRowIDs(t *testing.T, store Store, s *Snapshot, wantRows int64) {
	t.Helper()
	hwm, err := s.RowIDHighWaterMark()
	if err != nil {
		t.Fatal(err)
	}
	if hwm != wantRows-1 {
		t.Fatalf("high-water mark %d, want %d", hwm, wantRows-1)
	}
	added := map[string]int64{}
	for v := int64(0); v <= s.Version; v++ {
		actions, err := ReadCommit(t.Context(), store, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions {
			if a.Add != nil {
				added[a.Add.Path] = v
			}
		}
	}
	type span struct{ lo, hi int64 }
	var spans []span
	for _, a := range s.Files() {
		if a.BaseRowID == nil || a.DefaultRowCommitVersion == nil {
			t.Fatalf("add %s without baseRowId or defaultRowCommitVersion", a.Path)
		}
		if *a.DefaultRowCommitVersion != added[a.Path] {
			t.Errorf("add %s: defaultRowCommitVersion %d, added by version %d", a.Path, *a.DefaultRowCommitVersion, added[a.Path])
		}
		spans = append(spans, span{*a.BaseRowID, *a.BaseRowID + int64(numRecordsOf(t, a))})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	next := int64(0)
	for _, sp := range spans {
		if sp.lo != next {
			t.Fatalf("row id ranges %v: gap or overlap at %d", spans, next)
		}
		next = sp.hi
	}
	if next != wantRows {
		t.Fatalf("row id ranges %v end at %d, want %d", spans, next, wantRows)
	}
}

func numRecordsOf(t *testing.T, a *Add) int64 {
	st, err := ParseStats(a.Stats)
	if err != nil {
		t.Fatal(err)
	}
	return st.NumRecords
}

// Concurrent appenders lose races and rebase: each attempt assigns its
// ids again from the winner's high-water mark and its own version, and
// the checkpoints keep them.
func TestRowIDsAssignedAcrossRebases(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		s1 := rowTracked(t, store, map[string]string{"delta.checkpointInterval": "2"})
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = Commit(context.Background(), store, s1,
					[]Action{addAction(fmt.Sprint("a", i), "d"), addAction(fmt.Sprint("b", i), "d")}, CommitOptions{})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("appender %d: %v", i, err)
			}
		}
		s, err := Load(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != 1+n {
			t.Fatalf("version %d, want %d", s.Version, 1+n)
		}
		checkRowIDs(t, store, s, 2*10*n)
		// The latest checkpoint (version 6) holds the ids and the domain.
		cp, err := LoadVersion(t.Context(), store, 6)
		if err != nil {
			t.Fatal(err)
		}
		if hwm, _ := cp.RowIDHighWaterMark(); hwm != 2*10*5-1 {
			t.Fatalf("version 6 high-water mark %d, want %d", hwm, 2*10*5-1)
		}
		for _, a := range cp.Files() {
			if a.BaseRowID == nil || a.DefaultRowCommitVersion == nil {
				t.Fatalf("version 6: add %s without row ids", a.Path)
			}
		}
	})
}

// An add that re-adds a live file (a new deletion vector) keeps its row
// ids and commit version; the mark does not move.
func TestRowIDsKeptOnReadd(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s1 := rowTracked(t, store, nil)
		if _, err := Commit(ctx, store, s1, []Action{addAction("f", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s2, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		f := s2.Files()[0]
		marked := *f
		marked.DeletionVector = &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 1}
		if _, err := Commit(ctx, store, s2, []Action{{Remove: f.Remove(1, true)}, {Add: &marked}, addAction("g", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s3, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range s3.Files() {
			switch {
			case a.DeletionVector != nil && (*a.BaseRowID != 0 || *a.DefaultRowCommitVersion != 2):
				t.Fatalf("re-added file: baseRowId %d, version %d, want 0 and 2", *a.BaseRowID, *a.DefaultRowCommitVersion)
			case a.DeletionVector == nil && (*a.BaseRowID != 10 || *a.DefaultRowCommitVersion != 3):
				t.Fatalf("new file: baseRowId %d, version %d, want 10 and 3", *a.BaseRowID, *a.DefaultRowCommitVersion)
			}
		}
		if hwm, _ := s3.RowIDHighWaterMark(); hwm != 19 {
			t.Fatalf("high-water mark %d, want 19", hwm)
		}
	})
}

func TestRowTrackingRefusals(t *testing.T) {
	ctx := t.Context()
	// Stats without numRecords would give the file a baseRowId without
	// moving the mark past its rows (the next file would share its ids).
	for name, stats := range map[string][]string{
		"no stats":            {""},
		"no numRecords":       {`{"minValues":{"id":0},"maxValues":{"id":9},"nullCount":{"id":0}}`},
		"negative numRecords": {`{"numRecords":-1}`},
		"huge numRecords":     {`{"numRecords":92233720368547758070}`},
		"overflowing ids":     {`{"numRecords":9223372036854775807}`, `{"numRecords":1}`},
	} {
		t.Run(name, func(t *testing.T) {
			store := copyTable(t, nil, -1)
			s1 := rowTracked(t, store, nil)
			var adds []Action
			for i, st := range stats {
				a := addAction(fmt.Sprint("f", i), "d")
				a.Add.Stats = st
				adds = append(adds, a)
			}
			if _, err := Commit(ctx, store, s1, adds, CommitOptions{}); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Commit = %v, want ErrUnsupported", err)
			}
		})
	}
	t.Run("corrupt domain", func(t *testing.T) {
		store := copyTable(t, nil, -1)
		s1 := rowTracked(t, store, nil)
		bad := Action{DomainMetadata: &DomainMetadata{Domain: RowTrackingDomain, Configuration: `{"rowIdHighWaterMark":"x"}`}}
		if _, err := Commit(ctx, store, s1, []Action{bad}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s2, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Commit(ctx, store, s2, []Action{addAction("f", "d")}, CommitOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Commit = %v, want ErrCorrupt", err)
		}
	})
	t.Run("suspended", func(t *testing.T) {
		store := copyTable(t, nil, -1)
		s1 := rowTracked(t, store, map[string]string{"delta.rowTrackingSuspended": "true"})
		if _, err := Commit(ctx, store, s1, []Action{addAction("f", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s2, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if f := s2.Files()[0]; f.BaseRowID != nil {
			t.Fatalf("suspended row tracking assigned baseRowId %d", *f.BaseRowID)
		}
	})
}

// TestRowIDsOfReaddAfterRebase: a re-add (a new deletion vector) takes
// the file's row ids from the snapshot the commit lands on, not the stale
// ones of the snapshot the writer read; row-tracked commits carry Spark's
// delta.rowTracking.preserved tag.
func TestRowIDsOfReaddAfterRebase(t *testing.T) {
	ctx := t.Context()
	store := copyTable(t, nil, -1)
	s1 := rowTracked(t, store, nil)
	if _, err := Commit(ctx, store, s1, []Action{addAction("f", "d")}, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	read, err := Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	// A concurrent commit gives f other ids (a backfill would).
	moved := *read.Files()[0]
	base, ver := int64(500), int64(2)
	moved.BaseRowID, moved.DefaultRowCommitVersion, moved.DataChange = &base, &ver, false
	if _, err := Commit(ctx, store, read, []Action{{Add: &moved}}, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	landed, err := Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	stale := *read.Files()[0]
	stale.DeletionVector = &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 1}
	in, err := newIntent(read, []Action{{Remove: read.Files()[0].Remove(1, true)}, {Add: &stale}}, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := in.withRowIDs(landed)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range out {
		if a.Add != nil && (*a.Add.BaseRowID != base || *a.Add.DefaultRowCommitVersion != ver) {
			t.Fatalf("re-add after a rebase: baseRowId %d, version %d; want %d, %d", *a.Add.BaseRowID, *a.Add.DefaultRowCommitVersion, base, ver)
		}
	}
	if *stale.BaseRowID != 0 {
		t.Fatal("the caller's add was modified")
	}
	actions, err := ReadCommit(ctx, store, landed.Version)
	if err != nil {
		t.Fatal(err)
	}
	if ci := actions[0].CommitInfo; ci == nil || ci.Tags[rowTrackingPreservedTag] != "true" {
		t.Fatalf("commitInfo %+v without %s", ci, rowTrackingPreservedTag)
	}
}
