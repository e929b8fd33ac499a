package delta

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
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
			if got := deltalayout.ColumnNames(s); got != "key, score" {
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
