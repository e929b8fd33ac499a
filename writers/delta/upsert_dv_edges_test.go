package delta

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestUpsertMarkedFileWithoutStats: a live file logged without stats (as
// some writers do) gets a deletion vector from an upsert. The protocol
// requires numRecords in the stats of every add carrying a deletion
// vector (the Delta protocol, "Deletion Vectors": a file with a DV must
// have correct numRecords in its stats; readers compute
// logical rows as numRecords − cardinality): the re-added file states them.
func TestUpsertMarkedFileWithoutStats(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 50})

	// Re-log the seed file without stats (dataChange false: same rows).
	b := tableBucket(t, cfg)
	snap := snapshot(t, cfg)
	seed := *snap.Files()[0]
	now := int64(1)
	noStats := seed
	noStats.Stats, noStats.DataChange = "", false
	if _, err := deltalog.Commit(ctx, b, snap, []deltalog.Action{
		{Remove: seed.Remove(now, false)}, {Add: &noStats},
	}, deltalog.CommitOptions{Operation: "OPTIMIZE"}); err != nil {
		t.Fatal(err)
	}

	rec := idBatch(mem, idChange{10, "ten", "U"})
	defer rec.Release()
	info := commitOne(t, w, writers.TxnKey{Writer: "nostats", Epoch: 1}, rec)
	for _, a := range readCommit(t, cfg, info.Version) {
		if a.Add == nil || a.Add.Path != seed.Path {
			continue
		}
		if a.Add.DeletionVector == nil {
			t.Fatalf("seed file re-added without a deletion vector")
		}
		st, err := deltalog.ParseStats(a.Add.Stats)
		if a.Add.Stats == "" || err != nil || st.NumRecords != 50 {
			t.Fatalf("seed file re-added with deletion vector %+v and stats %q: want numRecords 50 (required with deletion vectors)", a.Add.DeletionVector, a.Add.Stats)
		}
		return
	}
	t.Fatal("the upsert did not re-add the seed file")
}

// TestUpsertConcurrentUpserts: several transactional writers upsert
// disjoint ids of the same files through one Writer at once (their plans
// conflict on shared files: each conflict is rolled back and replayed),
// while the key cache is warmed in the background after every commit.
// The table must end as the model says; -race watches the cache, the
// warm-ups and the merge outcome.
func TestUpsertConcurrentUpserts(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertDVConfig(memURI(t))
	cfg.Parquet.RowGroupRows = 16
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 100}, [2]int32{100, 200})
	cols := []string{"id", "str"}
	rows := tableRows(t, cfg, cols)
	const writersN, rounds = 4, 6
	changes := make([][][]idChange, writersN)
	errs := make(chan error, writersN)
	for g := range writersN {
		rng := rand.New(rand.NewPCG(uint64(g), 3))
		for r := range rounds {
			var cs []idChange
			seen := map[int32]bool{}
			for range 5 {
				id := int32(g + writersN*rng.IntN(60)) // ids ≡ g mod writersN
				if seen[id] {
					continue
				}
				seen[id] = true
				op := "U"
				if rng.IntN(4) == 0 {
					op = "D"
				}
				cs = append(cs, idChange{id, fmt.Sprintf("g%d-r%d", g, r), op})
			}
			changes[g] = append(changes[g], cs)
		}
	}
	for g := range writersN {
		go func() {
			errs <- func() error {
				for r, cs := range changes[g] {
					key := writers.TxnKey{Writer: fmt.Sprintf("w%d", g), Epoch: int64(r + 1)}
					for attempt := 0; ; attempt++ {
						rec := idBatch(mem, cs...)
						err := w.Write(ctx, key, rec)
						rec.Release()
						var d writers.Descriptor
						if err == nil {
							d, err = w.Precommit(ctx, key)
						}
						if err == nil {
							_, err = w.Commit(ctx, key, []writers.Descriptor{d})
						}
						if err == nil {
							break
						}
						if rb := w.Rollback(ctx, key); rb != nil {
							return rb
						}
						if !errors.Is(err, writers.ErrConflict) || attempt > 50 {
							return fmt.Errorf("writer %d round %d: %w", g, r, err)
						}
					}
				}
				return nil
			}()
		}()
	}
	for range writersN {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for g := range writersN {
		for _, cs := range changes[g] {
			rows = applyIDs(rows, cs)
		}
	}
	sameRows(t, "after concurrent upserts", tableRows(t, cfg, cols), rows)
}

// TestUpsertNullKeysDV: rows with a null key (appended by another writer)
// never match, are never marked, and keep their positions in the key
// index: later upserts answered from the index mark the right rows.
func TestUpsertNullKeysDV(t *testing.T) {
	mem := checkedMem(t)
	cfg := upsertDVConfig(memURI(t))
	cfg.Parquet.RowGroupRows = 3
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{100, 101})
	appender := openWriter(t, testConfig(cfg.TableURI, func(c *Config) { c.DeletionVectors = true; c.Parquet.RowGroupRows = 3 }), mem)
	b := array.NewRecordBuilder(mem, arrow.NewSchema(idSchema().Fields()[:2], nil))
	for i := range int32(20) {
		if i%3 == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int32Builder).Append(i)
		}
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("app%d", i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	commitOne(t, appender, writers.AutoKey("append"), rec)
	rec.Release()
	cols := []string{"id", "str"}
	rows := tableRows(t, cfg, cols)
	for epoch, cs := range [][]idChange{
		{{1, "one", "U"}, {5, "", "D"}, {19, "nineteen", "U"}, {50, "new", "I"}},
		{{2, "two", "U"}, {7, "", "D"}, {17, "x", "U"}, {1, "one again", "U"}},
		{{4, "four", "U"}, {8, "", "D"}, {10, "y", "U"}, {16, "z", "U"}, {14, "w", "U"}},
	} {
		rec := idBatch(mem, cs...)
		commitOne(t, w, writers.TxnKey{Writer: "nulls", Epoch: int64(epoch + 1)}, rec)
		rec.Release()
		if err := w.waitWarm(context.Background()); err != nil {
			t.Fatal(err)
		}
		rows = applyNullableIDs(rows, cs)
		sameRows(t, fmt.Sprintf("after upsert %d", epoch+1), tableRows(t, cfg, cols), rows)
	}
}

// applyNullableIDs is applyIDs keeping every null-key row.
func applyNullableIDs(rows []string, changes []idChange) []string {
	var nulls, rest []string
	for _, r := range rows {
		if strings.HasPrefix(r, nullText+"|") {
			nulls = append(nulls, r)
		} else {
			rest = append(rest, r)
		}
	}
	return sortedCopy(append(applyIDs(rest, changes), nulls...))
}

// TestUpsertDVDescriptorHandedOver: a deletion-vector plan precommitted
// by one Writer is committed by a fresh one (another server, or a
// restart), once; committing it again is a replay.
func TestUpsertDVDescriptorHandedOver(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 50})
	cols := []string{"id", "str"}
	want := tableRows(t, cfg, cols)
	cs := []idChange{{3, "three", "U"}, {4, "", "D"}, {77, "new", "I"}}
	rec := idBatch(mem, cs...)
	defer rec.Release()
	key := writers.TxnKey{Writer: "handover", Epoch: 1}
	d := precommitOne(t, w, key, rec)
	fresh := openWriter(t, cfg, mem)
	info, err := fresh.Commit(ctx, key, []writers.Descriptor{d})
	if err != nil || info.Replayed {
		t.Fatalf("Commit on a fresh writer: %+v, %v", info, err)
	}
	want = applyIDs(want, cs)
	sameRows(t, "after the hand-over", tableRows(t, cfg, cols), want)
	again, err := openWriter(t, cfg, mem).Commit(ctx, key, []writers.Descriptor{d})
	if err != nil || !again.Replayed || again.Version != info.Version {
		t.Fatalf("second Commit: %+v, %v; want a replay of version %d", again, err, info.Version)
	}
	sameRows(t, "after the replay", tableRows(t, cfg, cols), want)
}

// TestEmptyEpochOnAFreshUpsertTable: an upsert endpoint's first epoch
// with no rows (a stream that sent its schema only) creates the table and
// records the epoch, so that committed-epoch answers it: Spark calls
// foreachBatch for empty micro-batches too.
func TestEmptyEpochOnAFreshUpsertTable(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t), func(c *Config) {
		c.WriteMode, c.MergeKeys, c.DeletionVectors = ModeUpsert, []string{"id"}, true
	})
	w := openWriter(t, cfg, mem)
	key := writers.TxnKey{Writer: "q", Epoch: 0}
	empty := idBatch(mem)
	defer empty.Release()
	commitOne(t, w, key, empty)
	if epoch, ok, err := w.CommittedEpoch(context.Background(), "q"); err != nil || !ok || epoch != 0 {
		t.Fatalf("CommittedEpoch = %d, %v, %v; want epoch 0 recorded", epoch, ok, err)
	}
	rows := idBatch(mem, idRange(1, 4, "a")...)
	defer rows.Release()
	commitOne(t, w, writers.TxnKey{Writer: "q", Epoch: 1}, rows)
	if got := tableRows(t, cfg, []string{"id", "str"}); len(got) != 3 {
		t.Fatalf("rows %v, want 3", got)
	}
}
