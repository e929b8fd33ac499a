package lance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// appendHelperEnv names the dataset folder the test binary, run as
// appendHelper, commits racerRows to; helperModeEnv is the sink's mode
// (append when unset).
const (
	appendHelperEnv = "QUIVER_LANCE_APPEND_HELPER"
	helperModeEnv   = "QUIVER_LANCE_HELPER_MODE"
)

// The helper's commit: rows 100..102 as epoch 1 of writer racer; a
// merge_insert helper also sends rows 3..5 (matched: rewritten).
var (
	racerKey           = writers.TxnKey{Writer: "racer", Epoch: 1}
	racerFrom, racerTo = 100, 103
	racerUpdates       = [2]int{3, 6}
)

// appendHelper commits racerRows to the dataset in dir through the sink in
// mode (merge_insert on id: update_all, insert_all), as a separate Quiver
// process would, and returns the exit code.
func appendHelper(dir, mode string) int {
	ctx := context.Background()
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + dir
	var recs []arrow.RecordBatch
	if mode == ModeMergeInsert {
		cfg.WriteMode, cfg.On = ModeMergeInsert, []string{"id"}
		recs = append(recs, scenarioRows(memory.DefaultAllocator, racerUpdates[0], racerUpdates[1]))
	}
	recs = append(recs, scenarioRows(memory.DefaultAllocator, racerFrom, racerTo))
	// The helper process exits right after: an early return leaks nothing.
	w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: memory.DefaultAllocator})
	if err == nil {
		err = w.Open(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "append helper:", err)
		return 1
	}
	defer w.Close(ctx)
	for _, rec := range recs {
		err := w.Write(ctx, racerKey, rec)
		rec.Release()
		if err != nil {
			fmt.Fprintln(os.Stderr, "append helper:", err)
			return 1
		}
	}
	d, err := w.Precommit(ctx, racerKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, "append helper:", err)
		return 1
	}
	info, err := w.Commit(ctx, racerKey, []writers.Descriptor{d})
	if err != nil {
		fmt.Fprintln(os.Stderr, "append helper:", err)
		return 1
	}
	fmt.Printf("quiver committed version %d\n", info.Version)
	return 0
}

// helperCommand is the shell command that runs appendHelper on dir in mode.
func helperCommand(t *testing.T, dir, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s=%q %s=%q %q -test.run=^$", appendHelperEnv, dir, helperModeEnv, mode, exe)
}

func sortedKeys(m map[int64]string) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestLanceDBRebasesOverQuiverCommit: LanceDB opens version 1, a Quiver
// process commits version 2, then LanceDB commits a mergeInsert and a
// delete from its stale version 1: Lance rebases them over Quiver's
// Append, and Quiver reads the result, its epoch, and appends on top.
func TestLanceDBRebasesOverQuiverCommit(t *testing.T) {
	probetest.Dir(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	r1 := scenarioRows(mem, 0, 6)
	defer r1.Release()
	commitRows(t, w, writers.AutoKey("s1"), r1)

	out := probetest.Run(t, "race", db, "items", "--cmd", helperCommand(t, dir, ModeAppend))
	wantLines(t, out,
		"== LanceDB opened items at version 1",
		"quiver committed version 2",
		// mergeInsert (update id 0, insert id 1005) rebased to v3, the
		// delete of 1005 to v4: 6 + 3 Quiver rows.
		"== after race: version=4 rows=9",
		`{"id":"101","name":"n101","score":101.5,"tags":["t101",null]}`,
		"v2 rows=9", "v3 rows=10", "v4 rows=9",
	)
	if strings.Contains(out, "race FAILED") {
		t.Fatalf("LanceDB did not rebase over Quiver's commit:\n%s", out)
	}

	got := readIDs(t, w, mem)
	if want := []int64{0, 1, 2, 3, 4, 5, 100, 101, 102}; !slices.Equal(sortedKeys(got), want) {
		t.Fatalf("Quiver reads ids %v, want %v", sortedKeys(got), want)
	}
	if got[0] != "mutated" {
		t.Fatalf("Quiver reads name %q for id 0, want LanceDB's rebased update \"mutated\"", got[0])
	}
	if e, ok, err := w.CommittedEpoch(context.Background(), racerKey.Writer); err != nil || !ok || e != racerKey.Epoch {
		t.Fatalf("CommittedEpoch(racer) = %d, %v, %v; want 1", e, ok, err)
	}
	// Replaying the helper's epoch changes nothing; the next one appends.
	r2 := scenarioRows(mem, racerFrom, racerTo)
	defer r2.Release()
	if info := commitRows(t, w, racerKey, r2); !info.Replayed || info.Version != 2 {
		t.Fatalf("replayed epoch: %+v, want replayed at version 2", info)
	}
	r3 := scenarioRows(mem, 200, 202)
	defer r3.Release()
	if info := commitRows(t, w, writers.TxnKey{Writer: "racer", Epoch: 2}, r3); info.Version != 5 {
		t.Fatalf("append after the race made version %d, want 5", info.Version)
	}
	wantLines(t, probetest.Run(t, "verify", db, "items"), "== latest: version=5 rows=11", "v5 rows=11")
}

// TestQuiverRebasesOverLanceDBCommits: Quiver plans its commit on version
// 1, then LanceDB appends (v2), merges and deletes (v3, v4). Quiver's
// commit loses the race for version 2, reads the winners' Append, Update
// and Delete transactions and rebases to version 5; LanceDB reads all of
// it.
func TestQuiverRebasesOverLanceDBCommits(t *testing.T) {
	probetest.Dir(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(ctx)
	r1, r2 := scenarioRows(mem, 0, 6), scenarioRows(mem, 50, 53)
	defer r1.Release()
	defer r2.Release()
	commitRows(t, w, writers.AutoKey("s1"), r1)

	// Quiver's side up to the manifest write: data files and the base.
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	if err := w.Write(ctx, key, r2); err != nil {
		t.Fatal(err)
	}
	raw, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := decodeDescriptor(raw)
	if err != nil {
		t.Fatal(err)
	}
	base, err := w.latest(ctx)
	if err != nil || base.Version() != 1 {
		t.Fatalf("base version: %v, %v", base, err)
	}

	wantLines(t, probetest.Run(t, "append", db, "items", "--from", "1000", "--count", "2"), "version=2 rows=8")
	wantLines(t, probetest.Run(t, "verify", db, "items", "--mutate"), "== after mutate: version=4 rows=8")

	txn := &lancetable.Transaction{Op: lancetable.OpAppend, Fragments: []lancetable.Fragment{desc.Fragments[0].lance()},
		Properties: map[string]string{propWriter: key.Writer, propEpoch: "1"}}
	nd, err := lancetable.Commit(ctx, w.bucket, base, txn)
	if err != nil {
		t.Fatalf("commit from stale version 1: %v", err)
	}
	if nd.Version() != 5 || nd.Manifest.NumRows() != 11 {
		t.Fatalf("rebased commit made version %d with %d rows, want 5 and 11", nd.Version(), nd.Manifest.NumRows())
	}
	ids := map[uint64]bool{}
	for _, f := range nd.Manifest.Fragments {
		if ids[f.ID] {
			t.Fatalf("fragment id %d twice after the rebase", f.ID)
		}
		ids[f.ID] = true
	}
	out := probetest.Run(t, "verify", db, "items")
	wantLines(t, out, "== latest: version=5 rows=11",
		`{"id":"50","name":"n50","score":50.5,"tags":["t50",null]}`,
		`{"id":"1001","name":"lancedb1001","score":1001.25,"tags":["l1001"]}`,
		`"name":"mutated"`,
		"v4 rows=8", "v5 rows=11")
	if e, ok, err := w.CommittedEpoch(ctx, key.Writer); err != nil || !ok || e != 1 {
		t.Fatalf("CommittedEpoch(job) = %d, %v, %v; want 1", e, ok, err)
	}
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// TestLanceDBIndexSurvivesQuiverAppend: LanceDB creates a 2.0 table and a
// BTree index on id; Quiver appends, and LanceDB still lists the index.
func TestLanceDBIndexSurvivesQuiverAppend(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "t")
	probetest.Run(t, "scenario", db, "--storage", "2.0")
	wantLines(t, probetest.Run(t, "index", db, "t", "--column", "id"), "indexed: version=5", `"name":"id_idx"`)

	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	r := scenarioRows(mem, 20, 23)
	defer r.Release()
	if info := commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 1}, r); info.Version != 6 {
		t.Fatalf("append made version %d, want 6", info.Version)
	}
	d, err := w.latest(context.Background())
	if err != nil || !d.HasIndexSection() {
		t.Fatalf("Quiver's version has no index section (%v)", err)
	}
	out := probetest.Run(t, "verify", db, "t")
	wantLines(t, out, "== latest: version=6 rows=12", `"name":"id_idx"`, `"indexType":"BTree"`, `"columns":["id"]`,
		`{"id":"22","name":"n22","score":22.5,"tags":["t22",null]}`, "v6 rows=12",
		// The index still covers LanceDB's rows; Quiver's fragment is unindexed.
		`"numIndexedRows":9,"numUnindexedRows":3`)
}

// TestLanceDBRebasesOverQuiverMerge: LanceDB opens version 1, a Quiver
// process commits a merge_insert (ids 3..5 rewritten, 100..102 inserted:
// an Update with a deletion file on the fragment LanceDB then updates)
// as version 2, and LanceDB's mergeInsert and delete from its stale
// version 1 still commit on top of it.
func TestLanceDBRebasesOverQuiverMerge(t *testing.T) {
	probetest.Dir(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	r1 := scenarioRows(mem, 0, 6)
	defer r1.Release()
	commitRows(t, w, writers.AutoKey("s1"), r1)

	out := probetest.Run(t, "race", db, "items", "--cmd", helperCommand(t, dir, ModeMergeInsert))
	if strings.Contains(out, "race FAILED") {
		t.Fatalf("LanceDB did not commit over Quiver's merge:\n%s", out)
	}
	wantLines(t, out,
		"== LanceDB opened items at version 1",
		"quiver committed version 2",
		"== after race: version=4 rows=9",
		`{"id":"101","name":"n101","score":101.5,"tags":["t101",null]}`,
		"v2 rows=9", "v3 rows=10", "v4 rows=9",
	)
	got := readIDs(t, w, mem)
	if want := []int64{0, 1, 2, 3, 4, 5, 100, 101, 102}; !slices.Equal(sortedKeys(got), want) || published(t, w) != 9 {
		t.Fatalf("Quiver reads ids %v in %d rows, want %v once each", sortedKeys(got), published(t, w), want)
	}
	if got[0] != "mutated" {
		t.Fatalf("Quiver reads name %q for id 0, want LanceDB's update \"mutated\"", got[0])
	}
	if e, ok, err := w.CommittedEpoch(context.Background(), racerKey.Writer); err != nil || !ok || e != racerKey.Epoch {
		t.Fatalf("CommittedEpoch(racer) = %d, %v, %v; want 1", e, ok, err)
	}
}
