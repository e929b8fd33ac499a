package delta

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// logObjects lists the objects under _delta_log/ of cfg's table.
func logObjects(t *testing.T, cfg *Config) []string {
	t.Helper()
	var keys []string
	for o, err := range tableBucket(t, cfg).List(t.Context(), deltalog.LogDir, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

var otherSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// The first stream's files may be written under the table root, but no
// log entry until its commit: rolled back, it leaves no table, and the
// next stream, of another schema, creates the table in one commit, in
// every mode.
func TestFirstStreamCreatesTableAtCommit(t *testing.T) {
	firstSchema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	for mode, wantRows := range map[string]int64{ModeAppend: 3, ModeOverwrite: 3, ModeUpsert: 1} {
		t.Run(mode, func(t *testing.T) {
			c := newTC(t, fileURI(t), func(cfg *Config) {
				cfg.WriteMode = mode
				if mode == ModeUpsert {
					cfg.MergeKeys = []string{"key"}
				}
			})
			first := writers.TxnKey{Writer: "first", Epoch: 1}
			rec := writertest.ZeroRecord(c.mem, firstSchema, 4)
			err := c.w.Write(c.ctx, first, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.w.Precommit(c.ctx, first); err != nil {
				t.Fatal(err)
			}
			if logs := logObjects(t, c.cfg); len(logs) > 0 {
				t.Fatalf("a precommitted first stream wrote %v", logs)
			}
			if s, err := c.w.Schema(c.ctx); s != nil || err != nil {
				t.Fatalf("Schema while the first stream is precommitted: %v, %v; want none", s, err)
			}
			if err := c.w.Rollback(c.ctx, first); err != nil {
				t.Fatal(err)
			}
			if logs := logObjects(t, c.cfg); len(logs) > 0 {
				t.Fatalf("a rolled-back first stream left %v", logs)
			}

			// Three rows with the same (empty) key: an upsert keeps one.
			info := c.put(writers.TxnKey{Writer: "second", Epoch: 1}, writertest.ZeroRecord(c.mem, otherSchema, 3))
			snap := snapshot(t, c.cfg)
			if info.Version != 0 || snap.Version != 0 {
				t.Fatalf("commit version %d, table version %d: want the table created by this commit", info.Version, snap.Version)
			}
			s, err := snap.Schema()
			if err != nil {
				t.Fatal(err)
			}
			if got := columnNames(s); got != "key, score" {
				t.Fatalf("table columns %s, want key, score", got)
			}
			if v, ok := snap.TxnVersion("second"); !ok || v != 1 {
				t.Fatalf("txn of the creating commit: %d %v", v, ok)
			}
			if got := publishedRows(t, c.cfg); got != wantRows {
				t.Fatalf("%d rows published, want %d", got, wantRows)
			}
		})
	}
}

// Two servers commit the first streams of a table at once. With one
// schema one creates the table and the other appends (writertest's
// concurrent-first-commits); with different schemas the loser is refused
// (ErrInvalid, naming the winner's table) and publishes nothing.
func TestConcurrentFirstCommitsOfDifferentSchemas(t *testing.T) {
	for range 5 {
		c := newTC(t, fileURI(t))
		peer := openWriter(t, c.cfg, c.mem)
		recs := []arrow.RecordBatch{c.ids(0, 5), writertest.ZeroRecord(c.mem, otherSchema, 7)}
		ws := []*Writer{c.w, peer}
		keys := []writers.TxnKey{{Writer: "a", Epoch: 1}, {Writer: "b", Epoch: 1}}
		descs := make([]writers.Descriptor, 2)
		for i, w := range ws {
			err := w.Write(c.ctx, keys[i], recs[i])
			recs[i].Release()
			if err != nil {
				t.Fatal(err)
			}
			if descs[i], err = w.Precommit(c.ctx, keys[i]); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				<-start
				_, errs[i] = w.Commit(c.ctx, keys[i], []writers.Descriptor{descs[i]})
			})
		}
		close(start)
		wg.Wait()
		winner := 0
		if errs[0] != nil {
			winner = 1
		}
		loser := errs[1-winner]
		if errs[winner] != nil || !errors.Is(loser, writers.ErrInvalid) || !strings.Contains(loser.Error(), "not in the table") {
			t.Fatalf("commits: %v; want one to commit and the other refused with ErrInvalid", errs)
		}
		if got, want := publishedRows(t, c.cfg), []int64{5, 7}[winner]; got != want {
			t.Fatalf("%d rows published, want the winner's %d", got, want)
		}
		if _, ok, _ := ws[1-winner].CommittedEpoch(c.ctx, keys[1-winner].Writer); ok {
			t.Fatal("the refused commit recorded its epoch")
		}
	}
}
