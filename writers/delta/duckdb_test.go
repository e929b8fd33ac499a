package delta

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

func duckSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "day", Type: arrow.BinaryTypes.String},
	}, nil)
}

// duckBatch builds n rows from id start; amount, name, ts and price are
// null on every 7th, 11th, 13th and 5th row.
func duckBatch(mem memory.Allocator, rng *rand.Rand, start, n int) (arrow.RecordBatch, float64) {
	b := array.NewRecordBuilder(mem, duckSchema())
	defer b.Release()
	var sum float64
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 0 {
			b.Field(1).AppendNull()
		} else {
			a := math.Round(rng.Float64()*100000) / 100
			sum += a
			b.Field(1).(*array.Float64Builder).Append(a)
		}
		if i%11 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append("user-" + strconv.Itoa(rng.IntN(100000)))
		}
		if i%13 == 0 {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*1001 + 7))
		}
		if i%5 == 0 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.Decimal128Builder).Append(decimal128.FromI64(rng.Int64N(2_000_000) - 1_000_000))
		}
		b.Field(5).(*array.StringBuilder).Append([]string{"2026-01-01", "2026-01-02", "a b/c:d"}[i%3])
	}
	return b.NewRecordBatch(), sum
}

// TestDuckDBReadsTable: DuckDB, an independent Parquet reader, reads every
// active file of a partitioned table the sink wrote (several files per
// partition): the row count and sum(amount) over the table match what was
// sent, and each file's Delta stats match DuckDB's count, min, max and null
// counts.
func TestDuckDBReadsTable(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "table")
	cfg := testConfig("file://"+dir, func(c *Config) {
		c.PartitionBy = []string{"day"}
		c.TargetFileBytes = 32 << 10
		c.Parquet.RowGroupRows = 1000
	})
	w := openWriter(t, cfg, mem)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent float64
	const batches, rows = 4, 3000
	key := writers.AutoKey("duck")
	for i := range batches {
		rec, sum := duckBatch(mem, rng, i*rows, rows)
		sent += sum
		err := w.Write(ctx, key, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	snap := snapshot(t, cfg)
	if len(snap.Files()) < 6 {
		t.Fatalf("%d files, want several per partition", len(snap.Files()))
	}
	var totalRows int64
	var totalSum float64
	for _, a := range snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, "day=") || a.PartitionValues["day"] == nil {
			t.Fatalf("file %s: not in a day= directory, or no partition value", key)
		}
		f := duckFile(t, db, filepath.Join(dir, key))
		totalRows += f.rows
		totalSum += f.sum
		st, err := deltalog.ParseStats(a.Stats)
		if err != nil {
			t.Fatal(err)
		}
		if st.NumRecords != f.rows {
			t.Errorf("%s: numRecords %d, DuckDB counts %d", key, st.NumRecords, f.rows)
		}
		wantStat(t, key, st, "id", f.minID, f.maxID, 0)
		wantStat(t, key, st, "name", f.minName, f.maxName, f.nullNames)
		wantStat(t, key, st, "ts", f.minTS, f.maxTS, f.nullTS)
		wantStat(t, key, st, "price", f.minPrice, f.maxPrice, f.nullPrices)
		if n, _ := st.Nulls("amount"); n != f.nullAmounts {
			t.Errorf("%s: amount null count %d, DuckDB %d", key, n, f.nullAmounts)
		}
		if _, ok := st.Min("day"); ok {
			t.Errorf("%s: stats hold the partition column", key)
		}
	}
	if totalRows != batches*rows {
		t.Errorf("DuckDB reads %d rows, %d were sent", totalRows, batches*rows)
	}
	if math.Abs(totalSum-sent) > 1e-6*math.Abs(sent) {
		t.Errorf("DuckDB sum(amount) = %f, sent %f", totalSum, sent)
	}
}

// duckStats is what DuckDB says of one data file; bounds are rendered as
// the Delta stats JSON renders them.
type duckStats struct {
	rows, nullAmounts, nullNames, nullTS, nullPrices int64
	sum                                              float64
	minID, maxID, minName, maxName                   string
	minTS, maxTS, minPrice, maxPrice                 string
}

func duckFile(t *testing.T, db *sql.DB, path string) duckStats {
	t.Helper()
	var f duckStats
	lit := "'" + strings.ReplaceAll(path, "'", "''") + "'"
	err := db.QueryRow(`SELECT count(*), coalesce(sum(amount), 0),
		count(*) - count(amount), count(*) - count(name), count(*) - count(ts), count(*) - count(price),
		CAST(min(id) AS VARCHAR), CAST(max(id) AS VARCHAR), min(name), max(name),
		strftime(min(ts), '%Y-%m-%dT%H:%M:%S.%gZ'), strftime(max(ts), '%Y-%m-%dT%H:%M:%S.%gZ'),
		CAST(min(price) AS VARCHAR), CAST(max(price) AS VARCHAR)
		FROM read_parquet(`+lit+`)`).Scan(&f.rows, &f.sum,
		&f.nullAmounts, &f.nullNames, &f.nullTS, &f.nullPrices,
		&f.minID, &f.maxID, &f.minName, &f.maxName, &f.minTS, &f.maxTS, &f.minPrice, &f.maxPrice)
	if err != nil {
		t.Fatalf("duckdb read_parquet(%s): %v", url.PathEscape(path), err)
	}
	return f
}

// wantStat compares a column's Delta stats to DuckDB's answers.
func wantStat(t *testing.T, file string, st *deltalog.Stats, col, min, max string, nulls int64) {
	t.Helper()
	render := func(v any, ok bool) string {
		if !ok {
			return "<absent>"
		}
		if n, isNum := v.(json.Number); isNum {
			return n.String()
		}
		if s, isStr := v.(string); isStr {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if got := render(st.Min(col)); got != min {
		t.Errorf("%s: %s min %s, DuckDB %s", file, col, got, min)
	}
	if got := render(st.Max(col)); got != max {
		t.Errorf("%s: %s max %s, DuckDB %s", file, col, got, max)
	}
	if n, _ := st.Nulls(col); n != nulls {
		t.Errorf("%s: %s null count %d, DuckDB %d", file, col, n, nulls)
	}
}
