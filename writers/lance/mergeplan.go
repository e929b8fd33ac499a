package lance

import (
	"context"
	"math"
	"runtime"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// noAddr marks a source key without a target row.
const noAddr = math.MaxUint64

// mergeCounts are a merge's row counts, as Lance's MergeStats has them.
type mergeCounts struct {
	Inserted int64 `json:"inserted"`
	Updated  int64 `json:"updated"`
	Deleted  int64 `json:"deleted"`
	Skipped  int64 `json:"skipped_duplicates"`
}

// outRef is one row to write into the new fragment(s): row of source
// batch rec, whose key has ordinal ord in the source key set.
type outRef struct{ rec, row, ord int32 }

// mergePlan is what a merge does to one dataset version: the rows to
// write (updated and inserted, in source order) and the new deleted
// offsets of each fragment.
type mergePlan struct {
	out     []outRef
	deletes map[uint64][]uint32 // fragment id -> newly deleted offsets
	// replaced lists the source key ordinals whose target rows the merge
	// deletes (updated or deleted keys): after the merge such a key has
	// exactly the rows out writes for it. Rows deleted by
	// when_not_matched_by_source have keys outside the source and are
	// not listed.
	replaced []int32
	counts   mergeCounts
}

// targets maps source key ordinals to the row addresses of the live
// target rows with that key (more than one only when the target itself
// holds duplicate keys).
type targets struct {
	first []uint64
	more  map[int32][]uint64
	// indexOrd is the key index ordinal of each source key (-1: not
	// indexed), in the key set indexed, when the index found the targets.
	indexOrd []int32
	indexed  *merge.KeySet
}

func newTargets(n int) *targets {
	t := &targets{first: make([]uint64, n), more: map[int32][]uint64{}}
	for i := range t.first {
		t.first[i] = noAddr
	}
	return t
}

func (t *targets) add(ord int32, addr uint64) {
	if t.first[ord] == noAddr {
		t.first[ord] = addr
		return
	}
	t.more[ord] = append(t.more[ord], addr)
}

func (t *targets) of(ord int32) []uint64 {
	if t.first[ord] == noAddr {
		return nil
	}
	return append([]uint64{t.first[ord]}, t.more[ord]...)
}

// scanTargets reads only the key columns of every fragment of d (nil: an
// empty target), skipping deleted offsets, and returns the matches of the
// source keys; with bySourceDelete, the addresses of live rows whose key
// the source lacks go to plan.deletes. Fragments are scanned on every core
// (what a merge without an index costs is this scan), and their matches
// added in fragment order, as one pass would.
func scanTargets(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, src *source, cfg *Config, plan *mergePlan, mem memory.Allocator) (*targets, error) {
	t := newTargets(src.keys.Len())
	if d == nil {
		return t, nil
	}
	as, err := d.Manifest.Schema.ToArrow()
	if err != nil {
		return nil, err
	}
	if _, err := merge.NewKeyEncoder(as, cfg.On); err != nil {
		return nil, err
	}
	bySource := cfg.WhenNotMatchedBySource == "delete"
	// Most target rows match no source key: the matcher's filter answers
	// them from cache.
	match := merge.NewKeyMatcher(src.keys)
	frags := d.Manifest.Fragments
	scans := make([]fragmentScan, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range frags {
		g.Go(writers.Guard(func() error {
			return scans[i].scan(gctx, b, d, &frags[i], as, match, cfg.On, bySource, mem)
		}))
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, sc := range scans {
		for _, m := range sc.matches {
			t.add(m.ord, m.addr)
		}
		if len(sc.unmatched) > 0 {
			id := frags[i].ID
			plan.deletes[id] = append(plan.deletes[id], sc.unmatched...)
			plan.counts.Deleted += int64(len(sc.unmatched))
		}
	}
	return t, nil
}

// fragmentScan is what scanning one fragment's keys found: the live rows
// matching a source key, and (by source) the offsets of those matching
// none.
type fragmentScan struct {
	matches   []scanMatch
	unmatched []uint32
}

type scanMatch struct {
	ord  int32
	addr uint64
}

// scan reads fragment f's key columns (as is the dataset's Arrow schema)
// with an encoder of its own and matches its live rows against keys.
func (sc *fragmentScan) scan(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, f *lancetable.Fragment, as *arrow.Schema, keys *merge.KeyMatcher, on []string, bySource bool, mem memory.Allocator) error {
	enc, err := merge.NewKeyEncoder(as, on)
	if err != nil {
		return err
	}
	gone, err := deletedOffsets(ctx, b, f)
	if err != nil {
		return err
	}
	found := func(off uint32, ord int, ok bool) {
		if ok {
			sc.matches = append(sc.matches, scanMatch{int32(ord), f.ID<<32 | uint64(off)})
		} else if bySource {
			sc.unmatched = append(sc.unmatched, off)
		}
	}
	if i := as.FieldIndices(on[0]); len(on) == 1 && len(i) == 1 && as.Field(i[0]).Type.ID() == arrow.INT64 {
		if done, err := sc.scanInt64(ctx, b, d, f, on, keys, gone, mem, found); done || err != nil {
			return err
		}
	}
	return fragmentKeys(ctx, b, d, f, on, enc, mem, func(off uint32, key []byte) {
		if !gone.has(off) {
			ord, ok := keys.Find(key)
			found(off, ord, ok)
		}
	})
}

// scanInt64 is scan for a lone int64 key column (ids, the common case):
// the values are matched as they are (KeyMatcher.FindInt64), with no key
// encoded per row. A fragment with a null key is left to the generic scan
// (done false), which reports it.
func (sc *fragmentScan) scanInt64(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, f *lancetable.Fragment, on []string, keys *merge.KeyMatcher, gone droppedFragment, mem memory.Allocator, found func(off uint32, ord int, ok bool)) (done bool, err error) {
	recs, err := d.ReadColumns(ctx, b, f, on, mem)
	if err != nil {
		return false, err
	}
	defer lancefile.ReleaseRecords(recs)
	if !loneInt64(recs) { // a null key
		return false, nil
	}
	gone = gone.forRows(lancefile.Rows(recs))
	var at uint32 // the fragment offset of the record's first row
	for _, rec := range recs {
		for i, x := range rec.Column(0).(*array.Int64).Int64Values() {
			if off := at + uint32(i); !gone.inBits(off) {
				ord, ok := keys.FindInt64(x)
				found(off, ord, ok)
			}
		}
		at += uint32(rec.NumRows())
	}
	return true, nil
}

// planMerge applies Lance's merge_insert semantics (the full-schema
// executor, row by row in source order) to src against the matches t:
//
//   - a matched key: update_all deletes the target row and writes the
//     source row; delete deletes it; do_nothing keeps it; fail aborts the
//     merge naming the key. A second source row reaching a target row
//     already updated or deleted is a duplicate.
//   - an unmatched key: insert_all writes the row; a second source row
//     inserting the same key is a duplicate.
//   - a duplicate fails the merge naming the key (fail) or is skipped and
//     counted (first_seen).
//   - a changelog delete (_op D) deletes the matched target rows whatever
//     when_matched says, and does nothing for an unmatched key.
func planMerge(src *source, t *targets, cfg *Config, plan *mergePlan) error {
	done := make([]bool, src.keys.Len()) // key already updated, deleted or inserted
	dup := func(r srcRow) error {
		if cfg.SourceDuplicates == "first_seen" {
			plan.counts.Skipped++
			return nil
		}
		return writers.Errorf(writers.ErrInvalid,
			"lance: ambiguous merge insert: multiple source rows have the key (%s); send one row per key or set source_duplicates: first_seen", src.keyValues(r))
	}
	del := func(ord int32, addrs []uint64) {
		if len(addrs) > 0 {
			plan.replaced = append(plan.replaced, ord)
		}
		for _, a := range addrs {
			plan.deletes[a>>32] = append(plan.deletes[a>>32], uint32(a))
		}
	}
	for _, r := range src.rows {
		addrs := t.of(r.ord)
		switch {
		case r.del:
			del(r.ord, addrs)
			plan.counts.Deleted += int64(len(addrs))
		case len(addrs) > 0:
			switch cfg.WhenMatched {
			case "do_nothing":
				continue
			case "fail":
				return writers.Errorf(writers.ErrInvalid,
					"lance: merge insert failed: found a matching row with key values %s (when_matched: fail)", src.keyValues(r))
			}
			if done[r.ord] {
				if err := dup(r); err != nil {
					return err
				}
				continue
			}
			done[r.ord] = true
			del(r.ord, addrs)
			if cfg.WhenMatched == "delete" {
				plan.counts.Deleted += int64(len(addrs))
				continue
			}
			// Like Lance's join, one updated row per matched target row.
			for range addrs {
				plan.out = append(plan.out, outRef{r.rec, r.row, r.ord})
			}
			plan.counts.Updated += int64(len(addrs))
		case cfg.WhenNotMatched == "insert_all":
			if done[r.ord] {
				if err := dup(r); err != nil {
					return err
				}
				continue
			}
			done[r.ord] = true
			plan.out = append(plan.out, outRef{r.rec, r.row, r.ord})
			plan.counts.Inserted++
		}
	}
	for id, offs := range plan.deletes {
		slices.Sort(offs)
		plan.deletes[id] = slices.Compact(offs)
	}
	return nil
}
