package lancetable

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/tablepb"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// fakeFragment is a fragment whose data file need not exist: commits only
// write manifests and transactions.
func fakeFragment(name string, rows uint64) Fragment {
	return Fragment{Files: []DataFile{{Path: name + ".lance", Fields: []int32{0}, ColumnIndices: []int32{0}, Major: 2, SizeBytes: 100}}, PhysicalRows: rows}
}

// commitOp commits txn on base or fails the test.
func commitOp(t *testing.T, b *storage.Bucket, base *Dataset, txn *Transaction) *Dataset {
	t.Helper()
	d, err := Commit(context.Background(), b, base, txn)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fragmentIDs(d *Dataset) []uint64 {
	var ids []uint64
	for _, f := range d.Manifest.Fragments {
		ids = append(ids, f.ID)
	}
	return ids
}

// TestRewriteCommit: a Rewrite replaces its groups' fragments in place
// (contiguous) or at the end (not), with new ids past max_fragment_id; it
// rebases over a concurrent Append and an Update of other fragments, and
// conflicts with an Update or Rewrite of one of its fragments and with a
// CreateIndex; an Update losing to it conflicts too (its deletion files
// address rows of the replaced fragments).
func TestRewriteCommit(t *testing.T) {
	ctx := context.Background()
	b := openDir(t, t.TempDir())
	schema := &lancefile.Schema{Fields: []lancefile.Field{{Name: "id", ID: 0, ParentID: -1, LogicalType: "int64"}}}
	v1 := commitOp(t, b, nil, &Transaction{Op: OpOverwrite, Schema: schema,
		Fragments: []Fragment{fakeFragment("a", 1), fakeFragment("b", 1), fakeFragment("c", 1), fakeFragment("d", 1)}})
	frags := v1.Manifest.Fragments // ids 0-3
	rewrite := func(groups ...RewriteGroup) *Transaction { return &Transaction{Op: OpRewrite, Groups: groups} }

	// In place: [0 1] -> 4; not contiguous: [0 2] -> appended.
	d := commitOp(t, b, v1, rewrite(RewriteGroup{Old: frags[0:2], New: []Fragment{fakeFragment("ab", 2)}}))
	if got := fragmentIDs(d); !slices.Equal(got, []uint64{4, 2, 3}) || *d.Manifest.MaxFragmentID != 4 {
		t.Fatalf("contiguous rewrite: fragments %v, max id %d; want [4 2 3], 4", got, *d.Manifest.MaxFragmentID)
	}
	d2 := commitOp(t, b, d, rewrite(RewriteGroup{Old: []Fragment{d.Manifest.Fragments[0], d.Manifest.Fragments[2]}, New: []Fragment{fakeFragment("abd", 3)}}))
	if got := fragmentIDs(d2); !slices.Equal(got, []uint64{2, 5}) {
		t.Fatalf("scattered rewrite: fragments %v; want [2 5]", got)
	}
	if txn, err := d2.Transaction(ctx, b); err != nil || txn.Op != OpRewrite || len(txn.pb.GetRewrite().GetGroups()) != 1 {
		t.Fatalf("recorded transaction = %+v, %v", txn, err)
	}

	// A concurrent append: the rewrite planned on d2 rebases over it.
	appended := commitOp(t, b, d2, &Transaction{Op: OpAppend, Fragments: []Fragment{fakeFragment("e", 1)}})
	d3 := commitOp(t, b, d2, rewrite(RewriteGroup{Old: d2.Manifest.Fragments, New: []Fragment{fakeFragment("all", 4)}}))
	if got := fragmentIDs(d3); d3.Version() != appended.Version()+1 || !slices.Equal(got, []uint64{7, 6}) {
		t.Fatalf("rewrite over an append: version %d fragments %v; want %d, [7 6]", d3.Version(), got, appended.Version()+1)
	}

	// An update of fragment 6 (the appended one) does not touch fragment 7.
	f6 := d3.Manifest.Fragments[1]
	del := &DeletionFile{ReadVersion: d3.Version(), ID: 1, NumDeletedRows: 1}
	f6d := f6
	f6d.Deletion = del
	updated := commitOp(t, b, d3, &Transaction{Op: OpUpdate, Updated: []Fragment{f6d}})
	d4 := commitOp(t, b, d3, rewrite(RewriteGroup{Old: d3.Manifest.Fragments[:1], New: []Fragment{fakeFragment("all2", 4)}}))
	if d4.Version() != updated.Version()+1 || d4.Manifest.Fragments[1].Deletion == nil {
		t.Fatalf("rewrite over an update of another fragment: version %d, fragments %+v", d4.Version(), d4.Manifest.Fragments)
	}

	// Losing to an update, a rewrite, or an index of one of its fragments.
	for _, c := range []struct {
		name   string
		winner func(d *Dataset) *Transaction
	}{
		{"update", func(d *Dataset) *Transaction {
			return &Transaction{Op: OpUpdate, Updated: []Fragment{withDeletion(d.Manifest.Fragments[0], d.Version())}}
		}},
		{"rewrite", func(d *Dataset) *Transaction {
			return rewrite(RewriteGroup{Old: d.Manifest.Fragments[:1], New: []Fragment{fakeFragment("x", 4)}})
		}},
	} {
		won := commitOp(t, b, d4, c.winner(d4))
		_, err := Commit(ctx, b, d4, rewrite(RewriteGroup{Old: d4.Manifest.Fragments[:1], New: []Fragment{fakeFragment("y", 4)}}))
		if !errors.Is(err, writers.ErrConflict) {
			t.Fatalf("rewrite after a concurrent %s of its fragment: %v; want ErrConflict", c.name, err)
		}
		d4 = won
	}
	// An Update planned before a rewrite of its fragment conflicts.
	before := d4
	commitOp(t, b, before, rewrite(RewriteGroup{Old: before.Manifest.Fragments, New: []Fragment{fakeFragment("z", 8)}}))
	_, err := Commit(ctx, b, before, &Transaction{Op: OpUpdate, Updated: []Fragment{withDeletion(before.Manifest.Fragments[0], before.Version())}})
	if !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("update after a concurrent rewrite of its fragment: %v; want ErrConflict", err)
	}
	// A rewrite whose old fragment differs from the base's (a stale plan).
	latest, err := Latest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	stale := withDeletion(latest.Manifest.Fragments[0], 1)
	if _, err := Commit(ctx, b, latest, rewrite(RewriteGroup{Old: []Fragment{stale}, New: []Fragment{fakeFragment("s", 1)}})); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("rewrite of a fragment that changed: %v; want ErrConflict", err)
	}
}

func withDeletion(f Fragment, v uint64) Fragment {
	f.Deletion = &DeletionFile{ReadVersion: v, ID: 9, NumDeletedRows: 1}
	return f
}

// TestIndexed: the fragments of every index's bitmap are indexed; an
// index without a bitmap may cover any fragment; a Rewrite conflicts with
// a concurrent CreateIndex (it may cover the rewritten fragments).
func TestIndexed(t *testing.T) {
	bitmap := func(ids ...uint32) []byte {
		b, err := roaring.BitmapOf(ids...).ToBytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	section := func(idx ...*tablepb.IndexMetadata) []byte {
		b, err := lancefile.Marshal(&tablepb.IndexSection{Indices: idx})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := &Dataset{Manifest: &Manifest{Version: 3}, index: section(
		&tablepb.IndexMetadata{Name: "a", FragmentBitmap: bitmap(1, 3)},
		&tablepb.IndexMetadata{Name: "b", FragmentBitmap: bitmap(7)})}
	in, err := d.Indexed()
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]bool{0: false, 1: true, 3: true, 4: false, 7: true, 1 << 33: false} {
		if in(id) != want {
			t.Errorf("fragment %d indexed = %v, want %v", id, !want, want)
		}
	}
	d.index = section(&tablepb.IndexMetadata{Name: "old"})
	if in, err := d.Indexed(); err != nil || !in(12345) {
		t.Errorf("an index without a bitmap: fragment 12345 not deemed indexed (%v)", err)
	}
	d.index = section(&tablepb.IndexMetadata{Name: "bad", FragmentBitmap: []byte{1, 2, 3}})
	if _, err := d.Indexed(); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("malformed bitmap: %v, want ErrInvalid", err)
	}
	none := &Dataset{Manifest: &Manifest{}}
	if in, err := none.Indexed(); err != nil || in(0) {
		t.Errorf("no index section: fragment 0 indexed (%v)", err)
	}
	mine := &Transaction{Op: OpRewrite, Groups: []RewriteGroup{{Old: []Fragment{{ID: 2}}}}}
	createIndex := &Transaction{Op: OpCreateIndex, pb: &tablepb.Transaction{Operation: &tablepb.Transaction_CreateIndex_{CreateIndex: &tablepb.Transaction_CreateIndex{}}}}
	if compatible(mine, createIndex) {
		t.Error("a rewrite is compatible with a concurrent CreateIndex")
	}
	del := &Transaction{Op: OpDelete, pb: &tablepb.Transaction{Operation: &tablepb.Transaction_Delete_{Delete: &tablepb.Transaction_Delete{DeletedFragmentIds: []uint64{5}}}}}
	if !compatible(mine, del) {
		t.Error("a rewrite of fragment 2 conflicts with a delete of fragment 5")
	}
	del.pb.GetDelete().DeletedFragmentIds = []uint64{2}
	if compatible(mine, del) {
		t.Error("a rewrite of fragment 2 is compatible with a delete of fragment 2")
	}
}
