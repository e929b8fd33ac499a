package lance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers"
)

// diffSchema is the schema of the differential merge tests: key id or
// (id, k2), values val and name.
func diffSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k2", Type: arrow.BinaryTypes.String},
		{Name: "val", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

type diffRow struct {
	id   int64
	k2   string
	val  float64
	name string // "" = null
}

func diffRecord(mem memory.Allocator, rows []diffRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, diffSchema())
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.k2)
		b.Field(2).(*array.Float64Builder).Append(r.val)
		if r.name == "" {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(r.name)
		}
	}
	return b.NewRecordBatch()
}

func writeIPC(t *testing.T, path string, rec arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// mergeWriter opens a merge_insert writer on dir with the options opts
// (when_matched, when_not_matched, when_not_matched_by_source).
func mergeWriter(t *testing.T, dir string, mem memory.Allocator, on []string, opts [3]string) *Writer {
	t.Helper()
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + dir
	cfg.WriteMode = ModeMergeInsert
	cfg.On = on
	cfg.WhenMatched, cfg.WhenNotMatched, cfg.WhenNotMatchedBySource = opts[0], opts[1], opts[2]
	return openWriter(t, cfg, mem)
}

// mergeRows runs one merge of rec through w as epoch of writer "job".
func mergeRows(w *Writer, epoch int64, rec arrow.RecordBatch) (writers.CommitInfo, error) {
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: epoch}
	if err := w.Write(ctx, key, rec); err != nil {
		return writers.CommitInfo{}, err
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		_ = w.Rollback(ctx, key)
		return writers.CommitInfo{}, err
	}
	return w.Commit(ctx, key, []writers.Descriptor{d})
}

// TestMergeInsertMatchesLanceDB is the differential test: random rounds of
// updates, inserts, duplicate source keys and not-matched-by-source
// deletes, under a sample of option combinations, are merged by Quiver
// into one copy of a dataset and by LanceDB's mergeInsert into another;
// after every round both must fail, or hold the same rows (read through
// LanceDB, sorted by key).
func TestMergeInsertMatchesLanceDB(t *testing.T) {
	probetest.Dir(t)
	for _, on := range [][]string{{"id"}, {"id", "k2"}} {
		t.Run(strings.Join(on, "+"), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(7, uint64(len(on))))
			db := t.TempDir()
			qdir, ldir := filepath.Join(db, "q.lance"), filepath.Join(db, "l.lance")
			// The start: two fragments, ids 0..29, k2 "a" or "b".
			var live []diffRow
			for i := range 30 {
				live = append(live, diffRow{id: int64(i), k2: string(rune('a' + i%2)), val: float64(i), name: fmt.Sprintf("r%d", i)})
			}
			w := newWriter(t, qdir, mem)
			for _, part := range [][]diffRow{live[:18], live[18:]} {
				rec := diffRecord(mem, part)
				commitRows(t, w, writers.AutoKey("seed"), rec)
				rec.Release()
			}
			w.Close(context.Background())
			if err := os.CopyFS(ldir, os.DirFS(qdir)); err != nil {
				t.Fatal(err)
			}
			combos := [][3]string{
				{"update_all", "insert_all", "keep"}, {"update_all", "insert_all", "delete"},
				{"update_all", "do_nothing", "keep"}, {"do_nothing", "insert_all", "keep"},
				{"update_all", "do_nothing", "delete"}, {"do_nothing", "insert_all", "delete"},
			}
			next := int64(100)
			// One writer for every round: its key index is built once and
			// then kept in sync with its own commits.
			mw := mergeWriter(t, qdir, mem, on, combos[0])
			defer mw.Close(context.Background())
			for round := range len(combos) {
				opts := combos[round]
				mw.cfg.WhenMatched, mw.cfg.WhenNotMatched, mw.cfg.WhenNotMatchedBySource = opts[0], opts[1], opts[2]
				src := randomSource(rng, live, &next, round)
				rec := diffRecord(mem, src)
				file := filepath.Join(db, fmt.Sprintf("src%d.arrow", round))
				writeIPC(t, file, rec)
				_, qerr := mergeRows(mw, int64(round+1), rec)
				rec.Release()
				out := probetest.Run(t, "merge-insert", db, "l", file, "--on", strings.Join(on, ","),
					"--matched", opts[0], "--not-matched", opts[1], "--by-source", opts[2], "--compare", "q")
				lerr, lrows, qrows := parseDiff(t, out)
				t.Logf("round %d %v: %d source rows, quiver err %v, lancedb err %q", round, opts, len(src), qerr, lerr)
				if (qerr != nil) != (lerr != "") {
					t.Fatalf("round %d %v: Quiver error %v, LanceDB error %q", round, opts, qerr, lerr)
				}
				if lrows != qrows {
					t.Fatalf("round %d %v: tables differ\nLanceDB: %s\nQuiver:  %s", round, opts, lrows, qrows)
				}
				live = decodeRows(t, lrows)
			}
		})
	}
}

// randomSource returns a source of updates of existing keys, new keys and,
// in odd rounds, a duplicated existing key (LanceDB then fails the merge
// too, its source_duplicates default being fail).
func randomSource(rng *rand.Rand, live []diffRow, next *int64, round int) []diffRow {
	var src []diffRow
	for _, r := range live {
		if rng.IntN(3) == 0 {
			src = append(src, diffRow{id: r.id, k2: r.k2, val: r.val + 1000, name: fmt.Sprintf("u%d-%d", round, r.id)})
		}
	}
	for range 1 + rng.IntN(6) {
		src = append(src, diffRow{id: *next, k2: "n", val: float64(*next), name: ""})
		*next++
	}
	if round%2 == 1 && len(src) > 0 && len(live) > 0 {
		r := live[rng.IntN(len(live))]
		src = append(src, diffRow{id: r.id, k2: r.k2, val: -1, name: "dup"}, diffRow{id: r.id, k2: r.k2, val: -2, name: "dup"})
	}
	rng.Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	return src
}

// parseDiff reads merge-insert --compare output: LanceDB's error (or ""),
// then the rows of the LanceDB copy and of the Quiver copy as JSON.
func parseDiff(t *testing.T, out string) (string, string, string) {
	t.Helper()
	var lerr string
	rows := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if e, ok := m["error"]; ok {
			_ = json.Unmarshal(e, &lerr)
		}
		if n, ok := m["name"]; ok {
			var name string
			_ = json.Unmarshal(n, &name)
			rows[name] = string(m["rows"])
		}
	}
	if rows["l"] == "" || rows["q"] == "" {
		t.Fatalf("merge-insert output lacks the dumps:\n%s", out)
	}
	return lerr, rows["l"], rows["q"]
}

func decodeRows(t *testing.T, js string) []diffRow {
	t.Helper()
	var rows []struct {
		ID   string  `json:"id"`
		K2   string  `json:"k2"`
		Val  float64 `json:"val"`
		Name *string `json:"name"`
	}
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	out := make([]diffRow, len(rows))
	for i, r := range rows {
		var id int64
		fmt.Sscan(r.ID, &id)
		out[i] = diffRow{id: id, k2: r.K2, val: r.Val}
		if r.Name != nil {
			out[i].name = *r.Name
		}
	}
	return out
}

// TestMergeInsertIntoLanceDBDataset: Quiver merges into the storage-2.0
// dataset LanceDB's scenario wrote (it has .arrow deletion files from
// LanceDB's own mergeInsert and delete), and LanceDB reads the result and
// merges into and deletes from it again (verify --mutate).
func TestMergeInsertIntoLanceDBDataset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "t")
	probetest.Run(t, "scenario", db, "--storage", "2.0")
	// Ids 1..3, 5..10 live; update 1 (fragment 0, which has deletions) and
	// 9 (LanceDB's merge fragment), insert 11; delete every other key.
	w := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"update_all", "insert_all", "delete"})
	b := array.NewRecordBuilder(mem, scenarioSchema())
	for _, id := range []int64{1, 9, 11} {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("q%d", id))
		b.Field(2).(*array.Float64Builder).Append(float64(id) + 0.75)
		b.Field(3).AppendNull()
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	info, err := mergeRows(w, 1, rec)
	if err != nil {
		t.Fatal(err)
	}
	w.Close(context.Background())
	if info.Version != 5 {
		t.Fatalf("merge made version %d, want 5", info.Version)
	}
	out := probetest.Run(t, "verify", db, "t", "--mutate")
	wantLines(t, out, "== latest: version=5 rows=3",
		`{"id":"1","name":"q1","score":1.75,"tags":null}`,
		`{"id":"9","name":"q9","score":9.75,"tags":null}`,
		`{"id":"11","name":"q11","score":11.75,"tags":null}`,
		"v4 rows=9", "v5 rows=3",
		"== after mutate: version=7 rows=3")
}

// TestLanceDBMutatesQuiverMerge: LanceDB reads every version of a dataset
// Quiver created and merged into (updates, inserts, a fragment emptied and
// dropped), and merges into and deletes from Quiver's result.
func TestLanceDBMutatesQuiverMerge(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	for _, r := range [][2]int{{0, 4}, {4, 10}} {
		rec := scenarioRows(mem, r[0], r[1])
		commitRows(t, w, writers.AutoKey("seed"), rec)
		rec.Release()
	}
	w.Close(context.Background())
	// Update all of fragment 0 (ids 0..3: it is dropped) and id 7, insert 20.
	m := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"update_all", "insert_all", "keep"})
	defer m.Close(context.Background())
	rec := scenarioRows(mem, 0, 4)
	more := scenarioRows(mem, 7, 8)
	ins := scenarioRows(mem, 20, 21)
	for _, r := range []arrow.RecordBatch{rec, more, ins} {
		if err := m.Write(context.Background(), writers.TxnKey{Writer: "job", Epoch: 1}, r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	d, err := m.Precommit(context.Background(), writers.TxnKey{Writer: "job", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Commit(context.Background(), writers.TxnKey{Writer: "job", Epoch: 1}, []writers.Descriptor{d})
	if err != nil || info.Version != 3 {
		t.Fatalf("merge commit: %+v, %v", info, err)
	}
	latest, err := m.latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(latest.Manifest.Fragments); n != 2 {
		t.Fatalf("after the merge the dataset has %d fragments, want 2 (fragment 0 dropped)", n)
	}
	out := probetest.Run(t, "verify", db, "items", "--mutate")
	wantLines(t, out, "== latest: version=3 rows=11", "v1 rows=4", "v2 rows=10", "v3 rows=11",
		`{"id":"20","name":"n20","score":20.5,"tags":null}`, "== after mutate: version=5 rows=11")
}
