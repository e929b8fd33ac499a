package lance

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

// liveRows returns every live row of the latest version (duplicate keys
// included).
func liveRows(t *testing.T, w *Writer, mem memory.Allocator) []diffRow {
	t.Helper()
	var out []diffRow
	eachLiveRecord(t, w, mem, func(rec arrow.RecordBatch) {
		for r := range int(rec.NumRows()) {
			out = append(out, diffRow{id: rec.Column(0).(*array.Int64).Value(r), k2: rec.Column(1).ValueStr(r),
				val: rec.Column(2).(*array.Float64).Value(r), name: rec.Column(3).ValueStr(r)})
		}
	})
	return out
}

// plannedBy is a merge plan in comparable form, or its error.
type plannedBy struct {
	out     []outRef
	deletes map[uint64][]uint32
	counts  mergeCounts
	err     string
}

// planOf plans the merge of rows against the latest version through the
// key index (useIndex: built first if cold, as a merge's commit would in
// the background) or by scanning the key columns.
func planOf(t *testing.T, w *Writer, rows []diffRow, useIndex bool, mem memory.Allocator) plannedBy {
	t.Helper()
	ctx := context.Background()
	d, err := w.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := diffRecord(mem, rows)
	defer rec.Release()
	src, err := newSource([]arrow.RecordBatch{rec}, w.cfg.On, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Release()
	plan := &mergePlan{deletes: map[uint64][]uint32{}}
	var tg *targets
	if useIndex {
		warmIndex(t, w, d, mem)
		tg, err = w.findTargets(ctx, d, src, plan, mem)
	} else {
		tg, err = scanTargets(ctx, w.bucket, d, src, w.cfg, plan, mem)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := planMerge(src, tg, w.cfg, plan); err != nil {
		return plannedBy{err: err.Error()}
	}
	return plannedBy{out: plan.out, deletes: plan.deletes, counts: plan.counts}
}

// TestKeyIndexMatchesScan: over random rounds on one long-lived merge
// writer (so the index is built once and then kept in sync with its own
// commits), with another Quiver writer appending duplicate and new keys in
// between and, with LanceDB, LanceDB merging into the same dataset, the
// index's plans equal the scan's, and the index holds exactly the live
// keys and rows.
func TestKeyIndexMatchesScan(t *testing.T) {
	for _, tc := range []struct {
		withLanceDB bool
		on          []string
	}{{false, []string{"id", "k2"}}, {true, []string{"id", "k2"}}, {false, []string{"id"}}, {true, []string{"id"}}} {
		withLanceDB, on := tc.withLanceDB, tc.on
		t.Run(fmt.Sprintf("lancedb=%v/on=%s", withLanceDB, strings.Join(on, ",")), func(t *testing.T) {
			if withLanceDB {
				probetest.Dir(t)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			db, dir := dbDir(t, "t")
			rng := rand.New(rand.NewPCG(11, 3))
			var seed []diffRow
			for i := range 40 {
				seed = append(seed, diffRow{id: int64(i), k2: "a", val: float64(i), name: fmt.Sprintf("r%d", i)})
			}
			other := newWriter(t, dir, mem)
			defer other.Close(context.Background())
			for _, part := range [][]diffRow{seed[:25], seed[25:]} {
				rec := diffRecord(mem, part)
				commitRows(t, other, writers.AutoKey("seed"), rec)
				rec.Release()
			}
			w := mergeWriter(t, dir, mem, on, [3]string{"update_all", "insert_all", "keep"})
			defer w.Close(context.Background())
			combos := [][4]string{
				{"update_all", "insert_all", "keep", "fail"}, {"update_all", "insert_all", "delete", "first_seen"},
				{"delete", "insert_all", "keep", "first_seen"}, {"do_nothing", "insert_all", "keep", "fail"},
				{"update_all", "do_nothing", "keep", "first_seen"},
			}
			next := int64(1000)
			for round := range 15 {
				switch round % 5 {
				case 1: // another Quiver writer appends a duplicate of a live key and a new key
					live := liveRows(t, w, mem)
					rec := diffRecord(mem, []diffRow{live[rng.IntN(len(live))], {id: next, k2: "a", name: "o"}})
					next++
					commitRows(t, other, writers.AutoKey("other"), rec)
					rec.Release()
				case 3:
					if !withLanceDB {
						break
					}
					// LanceDB merges: updated rows get deletion files, new rows a new fragment.
					var src []diffRow
					for _, r := range liveRows(t, w, mem) {
						if rng.IntN(4) == 0 && !slices.ContainsFunc(src, func(s diffRow) bool { return s.id == r.id }) {
							src = append(src, diffRow{id: r.id, k2: r.k2, val: -r.val, name: "l"})
						}
					}
					src = append(src, diffRow{id: next, k2: "a", name: "l"})
					next++
					rec := diffRecord(mem, src)
					file := filepath.Join(db, fmt.Sprintf("l%d.arrow", round))
					writeIPC(t, file, rec)
					rec.Release()
					probetest.Run(t, "merge-insert", db, "t", file, "--on", strings.Join(on, ","))
				}
				c := combos[round%len(combos)]
				w.cfg.WhenMatched, w.cfg.WhenNotMatched, w.cfg.WhenNotMatchedBySource, w.cfg.SourceDuplicates = c[0], c[1], c[2], c[3]
				live := liveRows(t, w, mem)
				src := randomSource(rng, live, &next, round)
				if c[2] == "delete" {
					src = src[:len(src)*3/4] // by-source deletes need keys the source lacks
				}
				scan, idx := planOf(t, w, src, false, mem), planOf(t, w, src, true, mem)
				if scan.err != idx.err || !slices.Equal(scan.out, idx.out) || scan.counts != idx.counts ||
					!maps.EqualFunc(scan.deletes, idx.deletes, slices.Equal) {
					t.Fatalf("round %d %v: scan plan %+v, index plan %+v", round, c, scan, idx)
				}
				distinct := map[[2]string]bool{}
				for _, r := range live {
					k := [2]string{fmt.Sprint(r.id), r.k2}
					if len(on) == 1 {
						k[1] = ""
					}
					distinct[k] = true
				}
				indexIdle(w)
				var indexed uint64
				for _, f := range w.idx.frags {
					indexed += f.live
				}
				if w.idx.Len() != len(distinct) || indexed != uint64(len(live)) {
					t.Fatalf("round %d: index holds %d keys, %d rows; dataset has %d keys, %d rows",
						round, w.idx.Len(), indexed, len(distinct), len(live))
				}
				// Kept current by patches and syncs, it holds what an index
				// built from scratch on this version holds (deletion files
				// and duplicate keys included).
				d, err := w.latest(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				fresh := newKeyIndex()
				if _, err := fresh.sync(context.Background(), w.bucket, d, on, 0, mem); err != nil {
					t.Fatal(err)
				}
				if got, want := indexContent(w.idx), indexContent(fresh); !maps.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("round %d: the kept index holds %v, one built from scratch %v", round, got, want)
				}
				rec := diffRecord(mem, src)
				_, err = mergeRows(w, int64(round+1), rec)
				rec.Release()
				if (err != nil) != (scan.err != "") {
					t.Fatalf("round %d: merge error %v, planned error %q", round, err, scan.err)
				}
				t.Logf("round %d %v: %d source rows, counts %+v, err %q", round, c, len(src), scan.counts, scan.err)
			}
			indexIdle(w)
			if n := testutil.ToFloat64(w.m.indexSyncs.WithLabelValues("rebuilt")); n != 1 {
				t.Fatalf("the index was rebuilt %v times, want once (then patched)", n)
			}
			// Each commit in between patched the index: Quiver's own merges
			// at their commit (by_source delete ones at the next sync), the
			// other writers' commits at the next sync.
			patched := testutil.ToFloat64(w.m.indexSyncs.WithLabelValues("patched"))
			committed := testutil.ToFloat64(w.m.indexSyncs.WithLabelValues("committed"))
			if committed < 5 || patched+committed < 10 {
				t.Fatalf("the index was patched %v times by syncs and %v by its own commits, want one per commit in between, at least 5 by commits", patched, committed)
			}
		})
	}
}

// indexContent is every live key of x (in hex) with its sorted row
// addresses.
func indexContent(x *keyIndex) map[string][]uint64 {
	out := map[string][]uint64{}
	for ord, v := range x.vals {
		var addrs []uint64
		switch {
		case v == tombstone:
			continue
		case v&multiBit != 0:
			addrs = slices.Clone(x.multi[v&^multiBit])
		default:
			addrs = []uint64{v}
		}
		slices.Sort(addrs)
		out[fmt.Sprintf("%x", x.keys.Key(ord))] = addrs
	}
	return out
}

// TestKeyIndexMemory builds the index of 200,000 int64 keys and bounds its
// memory per key; a key_index_max_bytes below that falls back to scanning
// with the same result.
func TestKeyIndexMemory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	const n = 200_000
	rows := make([]diffRow, n)
	for i := range rows {
		rows[i] = diffRow{id: int64(i), k2: "a"}
	}
	seed := newWriter(t, dir, mem)
	rec := diffRecord(mem, rows)
	commitRows(t, seed, writers.AutoKey("seed"), rec)
	rec.Release()
	seed.Close(context.Background())
	for _, tc := range []struct {
		name     string
		maxBytes int64
		indexed  bool
	}{{"default", DefaultKeyIndexMaxBytes, true}, {"too small", 1 << 20, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"update_all", "insert_all", "keep"})
			defer w.Close(context.Background())
			w.cfg.KeyIndexMaxBytes = tc.maxBytes
			got := planOf(t, w, []diffRow{{id: 5, k2: "a"}, {id: n + 1, k2: "a"}}, true, mem)
			if got.counts != (mergeCounts{Inserted: 1, Updated: 1}) || !slices.Equal(got.deletes[0], []uint32{5}) {
				t.Fatalf("plan %+v, want id 5 updated at offset 5 and one insert", got)
			}
			indexIdle(w)
			if (w.idx != nil) != tc.indexed {
				t.Fatalf("index kept = %v, want %v", w.idx != nil, tc.indexed)
			}
			if !tc.indexed {
				return
			}
			perKey := float64(w.idx.MemoryBytes()) / float64(w.idx.Len())
			t.Logf("key index: %d keys, %d bytes, %.1f bytes/key", w.idx.Len(), w.idx.MemoryBytes(), perKey)
			if w.idx.Len() != n || perKey > 48 {
				t.Fatalf("index of %d keys uses %.1f bytes/key, want %d keys at <= 48", w.idx.Len(), perKey, n)
			}
		})
	}
}

// TestKeyIndexRemoveCompact: a key the target holds twice keeps its other
// address when one goes, becomes a tombstone when both go, and compacting
// drops tombstones without losing live addresses.
func TestKeyIndexRemoveCompact(t *testing.T) {
	x := newKeyIndex()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%d", i) }
	const n = 1000
	for i := range n {
		x.add(key(i), uint64(i))
	}
	x.add(key(1), 1<<32|1) // key 1 is in fragments 0 and 1
	x.add(key(2), 1<<32|2)
	x.frags = map[uint64]indexedFragment{0: {live: n}, 1: {live: 2}}
	x.remove(func(a uint64) bool { return a == 1 || a == 1<<32|2 || a == 2 || (a>>32 == 0 && a >= 10) })
	if x.Len() != 9 || x.frags[0].live != 8 || x.frags[1].live != 1 {
		t.Fatalf("after remove: %d keys, fragment rows %+v; want 9 keys, 8 and 1 rows", x.Len(), x.frags)
	}
	x.compact()
	if x.Len() != 9 || x.tombs != 0 || x.keys.Len() != 9 {
		t.Fatalf("after compact: %d keys, %d tombstones, %d slots", x.Len(), x.tombs, x.keys.Len())
	}
	for i, want := range map[int]uint64{0: 0, 1: 1<<32 | 1, 3: 3, 9: 9, 2: tombstone, 10: tombstone} {
		_, v, ok := x.get(key(i))
		if want == tombstone && ok || want != tombstone && (!ok || v != want) {
			t.Fatalf("key %d: %x, %v; want %x", i, v, ok, want)
		}
	}
}

// TestMergeMetrics: a merge counts its rows by action, its data and
// deletion files, and the key index's size and syncs.
func TestMergeMetrics(t *testing.T) {
	w, _, mem := seededIDMerge(t)
	w.cfg.SourceDuplicates = "first_seen"
	rec := diffRecord(mem, []diffRow{{id: 1, k2: "a"}, {id: 7, k2: "a"}, {id: 7, k2: "a"}, {id: 20, k2: "a"}})
	defer rec.Release()
	if _, err := mergeRows(w, 1, rec); err != nil {
		t.Fatal(err)
	}
	indexIdle(w) // the commit builds the index in the background
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"updated", testutil.ToFloat64(w.m.mergeRows.WithLabelValues("updated")), 2},
		{"inserted", testutil.ToFloat64(w.m.mergeRows.WithLabelValues("inserted")), 1},
		{"skipped", testutil.ToFloat64(w.m.mergeRows.WithLabelValues("skipped_duplicates")), 1},
		{"data files", testutil.ToFloat64(w.m.filesWritten), 1}, // the seed used another writer
		{"rows written", testutil.ToFloat64(w.m.rowsWritten), 3},
		{"deletion files", testutil.ToFloat64(w.m.delFiles), 2},
		{"index keys", testutil.ToFloat64(w.m.indexKeys), 11}, // built at the merge's version: id 20 inserted
		{"index rebuilt", testutil.ToFloat64(w.m.indexSyncs.WithLabelValues("rebuilt")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if testutil.ToFloat64(w.m.delBytes) <= 0 || testutil.ToFloat64(w.m.indexBytes) <= 0 {
		t.Fatalf("deletion bytes %v, index bytes %v: want both > 0", testutil.ToFloat64(w.m.delBytes), testutil.ToFloat64(w.m.indexBytes))
	}
}

// TestKeyIndexLookup: the parallel lookup of a large key set finds what
// one get per key finds, ordinals included.
func TestKeyIndexLookup(t *testing.T) {
	x := newKeyIndex()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	for i := range 100_000 {
		x.add(key(2*i), uint64(i)) // even keys
	}
	x.set(&indexPatch{indexOrd: []int32{0}}, 0, tombstone, nil) // key 0 is a tombstone
	src := merge.NewKeySet(0)
	for i := range 3 * parallelLookups {
		src.Add(key(i)) // half present
	}
	indexOrd := make([]int32, src.Len())
	found, err := x.lookup(src, indexOrd)
	if err != nil {
		t.Fatal(err)
	}
	for ord := range src.Len() {
		io, v, ok := x.get(src.Key(ord))
		if !ok || v == tombstone {
			v = noAddr
		}
		if found[ord] != v || indexOrd[ord] != int32(io) {
			t.Fatalf("key %d: lookup %x at %d, get %x at %d", ord, found[ord], indexOrd[ord], v, io)
		}
	}
	if found[0] != noAddr || indexOrd[0] != 0 || found[2] != 1 || found[1] != noAddr || indexOrd[1] != -1 {
		t.Fatalf("lookup of keys 0, 1, 2: %x %x %x at %v", found[0], found[1], found[2], indexOrd[:3])
	}
}

// TestRecordKeysRowErrorAtFragmentOffset: a null key in the second of a
// fragment's records is reported at its row in the fragment.
func TestRecordKeysRowErrorAtFragmentOffset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rec := func(vs []int64, valid []bool) arrow.RecordBatch {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.AppendValues(vs, valid)
		a := b.NewArray()
		defer a.Release()
		return array.NewRecordBatch(s, []arrow.Array{a}, int64(len(vs)))
	}
	recs := []arrow.RecordBatch{rec([]int64{1, 2, 3}, nil), rec([]int64{4, 0}, []bool{true, false})}
	defer lancefile.ReleaseRecords(recs)
	enc, err := merge.NewKeyEncoder(s, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	var offs []uint32
	err = recordKeys(recs, enc, func(off uint32, _ []byte) { offs = append(offs, off) })
	var re *merge.RowError
	if !errors.As(err, &re) || re.Row != 4 || re.StreamRow != 4 {
		t.Fatalf("recordKeys = %v, want a RowError at fragment row 4", err)
	}
	if fmt.Sprint(offs) != "[0 1 2]" {
		t.Errorf("keys at offsets %v, want [0 1 2]", offs)
	}
}

// TestRecordKeysChunks: records longer than keyChunkRows are encoded in
// chunks; every key comes with its fragment offset, and a null key past
// the first chunk of a later record is reported at its fragment row.
func TestRecordKeysChunks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	at := int64(0)
	rec := func(n int, null int) arrow.RecordBatch {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for i := range n {
			if i == null {
				b.AppendNull()
			} else {
				b.Append(at + int64(i))
			}
		}
		at += int64(n)
		a := b.NewArray()
		defer a.Release()
		return array.NewRecordBatch(s, []arrow.Array{a}, int64(n))
	}
	enc, err := merge.NewKeyEncoder(s, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(recs []arrow.RecordBatch) (int, error) {
		defer lancefile.ReleaseRecords(recs)
		var next uint32
		err := recordKeys(recs, enc, func(off uint32, k []byte) {
			if want := binary.BigEndian.AppendUint64(nil, uint64(off)^1<<63); off != next || !bytes.Equal(k, want) {
				t.Fatalf("key %x at offset %d, want %x at %d", k, off, want, next)
			}
			next++
		})
		return int(next), err
	}
	n, err := check([]arrow.RecordBatch{rec(2*keyChunkRows+5, -1), rec(7, -1), rec(keyChunkRows+1, -1)})
	if err != nil || n != 3*keyChunkRows+13 {
		t.Fatalf("recordKeys: %d keys, %v; want %d keys", n, err, 3*keyChunkRows+13)
	}
	at = 0
	_, err = check([]arrow.RecordBatch{rec(3, -1), rec(2*keyChunkRows, keyChunkRows+2)})
	var re *merge.RowError
	if !errors.As(err, &re) || re.Row != keyChunkRows+5 || re.StreamRow != keyChunkRows+5 {
		t.Fatalf("recordKeys = %v, want a RowError at fragment row %d", err, keyChunkRows+5)
	}
}

// TestKeyIndexSyncFails: a fragment that cannot be read (its data file
// cut short by another process) or a cancelled sync fails it, leaves the
// index empty for the next sync to rebuild, and holds no Arrow memory
// (the fragments read ahead are released).
func TestKeyIndexSyncFails(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	ctx := context.Background()
	d, err := w.latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	x := newKeyIndex()
	if _, err := x.sync(cancelled, w.bucket, d, w.cfg.On, 0, mem); err == nil || x.Len() != 0 || x.version != 0 {
		t.Fatalf("cancelled sync: %v, %d keys, version %d; want an error and an empty index", err, x.Len(), x.version)
	}
	files := onlyData(dataFiles(t, dir))
	if len(files) < 2 {
		t.Fatalf("data files %v, want two", files)
	}
	last := files[len(files)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := x.sync(ctx, w.bucket, d, w.cfg.On, 0, mem); err == nil || x.Len() != 0 || x.version != 0 {
		t.Fatalf("sync over a cut data file: %v, %d keys, version %d; want an error and an empty index", err, x.Len(), x.version)
	}
}

// TestKeyIndexHostileRowCount: the index is sized by the manifest's row
// count, another process's claim: a manifest claiming 2^40 rows reserves
// no more than a bounded hint (it would otherwise end the process out of
// memory).
func TestKeyIndexHostileRowCount(t *testing.T) {
	x := newKeyIndexSized(rebuiltSize(1 << 40))
	if b := x.MemoryBytes(); b > 256<<20 {
		t.Fatalf("an index sized for a claimed 2^40 rows holds %d bytes", b)
	}
}
