package delta

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestTypeWidening: Quiver's table of INT ids, widened to BIGINT as
// Spark's ALTER COLUMN … TYPE BIGINT does (delta.typeChanges, feature
// typeWidening), then upserted with BIGINT keys: the INT file's keys are
// matched, its rewrite (copy-on-write, some rows kept) is written as
// BIGINT, and the rows read back as expected.
func TestTypeWidening(t *testing.T) {
	mem := checkedMem(t)
	cfg := upsertIDConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 10})
	widen(t, cfg)

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, r := range []struct {
		id      int64
		str, op string
	}{{5, "five", "U"}, {1 << 40, "big", "I"}, {7, "", "D"}} {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.str)
		b.Field(2).(*array.StringBuilder).Append(r.op)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	commitOne(t, w, writers.TxnKey{Writer: "widen", Epoch: 1}, rec)
	sameRows(t, "after upsert", tableRows(t, cfg, []string{"id", "str"}), []string{
		"0|seed", "1099511627776|big", "1|seed", "2|seed", "3|seed", "4|seed", "5|five", "6|seed", "8|seed", "9|seed"})
	checkIDInt64(t, cfg)
}

// widen changes column id of cfg's table from integer to long, as Spark's
// ALTER TABLE … ALTER COLUMN id TYPE BIGINT does.
func widen(t *testing.T, cfg *Config) {
	t.Helper()
	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	schema.Fields[0].Type = deltalog.DataType{Name: "long"}
	schema.Fields[0].Metadata = map[string]json.RawMessage{"delta.typeChanges": json.RawMessage(`[{"toType":"long","fromType":"integer"}]`)}
	m := snap.Metadata
	m.SchemaString = schema.String()
	p := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"typeWidening"},
		WriterFeatures: []string{"typeWidening", "appendOnly", "invariants"}}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap,
		[]deltalog.Action{{MetaData: &m}, {Protocol: &p}}, deltalog.CommitOptions{Operation: "CHANGE COLUMN"}); err != nil {
		t.Fatal(err)
	}
}

// TestTypeWideningOptimize compacts Spark's INT file and BIGINT file of
// the widened table into one BIGINT file holding both rows.
func TestTypeWideningOptimize(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(goldenCopy(t, "type-widening"))
	w := openWriter(t, cfg, mem)
	res, err := w.Optimize(context.Background(), writers.OptimizeRequest{TargetFileBytes: 1 << 30})
	if err != nil || res.FilesRemoved != 2 || res.FilesAdded != 1 {
		t.Fatalf("Optimize: %+v, %v; want 2 files compacted into 1", res, err)
	}
	sameRows(t, "after optimize", tableRows(t, cfg, []string{"id", "str"}), []string{"1099511627776|y", "1|x"})
	checkIDInt64(t, cfg)
}

// checkIDInt64 checks that every data file stores column id as INT64.
func checkIDInt64(t *testing.T, cfg *Config) {
	t.Helper()
	for _, a := range snapshot(t, cfg).Files() {
		if typ := parquetFile(t, cfg, a).Root().Fields()[0].Type().Kind(); typ != parquet.Int64 {
			t.Errorf("file %s: id is %v, want INT64 (the widened type)", a.Path, typ)
		}
	}
}
