package delta

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// fullSchema is writertest.Schema plus a nullable partition column and a
// nullable data column, as a client that evolved the table sends it.
var fullSchema = arrow.NewSchema(append(writertest.Schema().Fields(),
	arrow.Field{Name: "day", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
), nil)

// fullRecord builds rows of fullSchema with ids from start: day "d1",
// extra the id plus a half.
func (c *tc) fullRecord(start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(c.mem, fullSchema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("new")
		b.Field(2).(*array.StringBuilder).Append("d1")
		b.Field(3).(*array.Float64Builder).Append(float64(i) + 0.5)
	}
	return b.NewRecordBatch()
}

// A client that does not know the columns another client added still
// writes: as Delta's schema enforcement does, nullable table columns a
// stream lacks are written as nulls (a null partition value for a
// partition column); missing non-nullable ones are refused.
func TestMissingNullableColumns(t *testing.T) {
	for _, mode := range []string{ModeAppend, ModeOverwrite} {
		t.Run(mode, func(t *testing.T) {
			c := newTC(t, memURI(t), func(cfg *Config) {
				cfg.WriteMode, cfg.PartitionBy = mode, []string{"day"}
			})
			c.put(writers.AutoKey("new"), c.fullRecord(0, 3))
			if mode == ModeOverwrite {
				// One transaction: the new client's rows and the old one's.
				key := writers.TxnKey{Writer: "job", Epoch: 1}
				rec := c.fullRecord(0, 3)
				err := c.w.Write(c.ctx, key, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				c.put(key, c.ids(10, 2))
			} else {
				c.put(writers.AutoKey("old"), c.ids(10, 2))
			}
			if err := c.w.CheckSchema(c.ctx, writertest.Schema()); err != nil {
				t.Fatalf("CheckSchema of the old client's schema: %v", err)
			}
			got := map[int64]string{}
			eachLiveBatch(t, c.cfg, c.mem, func(a *deltalog.Add, rec arrow.RecordBatch) {
				day := "null"
				if v := a.PartitionValues["day"]; v != nil {
					day = *v
				}
				extra := rec.Column(rec.Schema().FieldIndices("extra")[0]).(*array.Float64)
				ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
				for i := range int(rec.NumRows()) {
					v := "null"
					if extra.IsValid(i) {
						v = "set"
					}
					got[ids.Value(i)] = day + "/" + v
				}
			})
			want := map[int64]string{0: "d1/set", 1: "d1/set", 2: "d1/set", 10: "null/null", 11: "null/null"}
			if len(got) != len(want) {
				t.Fatalf("rows %v, want %v", got, want)
			}
			for id, w := range want {
				if got[id] != w {
					t.Errorf("row %d: day/extra %s, want %s", id, got[id], w)
				}
			}
			if snapshot(t, c.cfg).Metadata.SchemaString != mustDeltaSchema(t, fullSchema) {
				t.Error("the table schema changed")
			}
		})
	}
	t.Run("non-nullable", func(t *testing.T) {
		c := newTC(t, memURI(t))
		c.put(writers.AutoKey("a"), c.ids(0, 3))
		b := array.NewRecordBuilder(c.mem, arrow.NewSchema(writertest.Schema().Fields()[1:], nil))
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append("x")
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := c.w.Write(c.ctx, writers.AutoKey("b"), rec); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"id"`) {
			t.Fatalf("a batch without the non-nullable id: %v, want ErrInvalid naming it", err)
		}
	})
}

func mustDeltaSchema(t *testing.T, s *arrow.Schema) string {
	t.Helper()
	d, err := deltalog.FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// An upsert changelog lacking nullable table columns does as Delta's MERGE
// with schema evolution (UPDATE SET *, INSERT *): the rows it updates keep
// their values of those columns (partition values too), the rows it
// inserts get nulls. Also when the updated row's file predates the column.
func TestUpsertMissingColumns(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(fmt.Sprint("deletion vectors ", dv), func(t *testing.T) {
			t.Run("partitioned", func(t *testing.T) {
				c := newTC(t, memURI(t), func(cfg *Config) {
					cfg.WriteMode, cfg.MergeKeys, cfg.PartitionBy, cfg.DeletionVectors = ModeUpsert, []string{"id"}, []string{"day"}, dv
				})
				c.put(writers.AutoKey("new"), c.fullRecord(0, 4))
				c.put(writers.AutoKey("old"), c.namesRecord([]int64{1, 2, 10}, "old"))
				c.assertRows(map[int64]string{
					0: "new d1 0.5", 1: "old d1 1.5", 2: "old d1 2.5", 3: "new d1 3.5", 10: "old null null",
				})
			})
			t.Run("partition merge key", func(t *testing.T) {
				c := newTC(t, memURI(t), func(cfg *Config) {
					cfg.WriteMode, cfg.MergeKeys, cfg.PartitionBy, cfg.DeletionVectors = ModeUpsert, []string{"id", "day"}, []string{"day"}, dv
				})
				c.put(writers.AutoKey("new"), c.fullRecord(0, 4))
				b := array.NewRecordBuilder(c.mem, arrow.NewSchema(fullSchema.Fields()[:3], nil))
				for _, r := range []struct {
					id  int64
					day string
				}{{1, "d1"}, {2, "d1"}, {10, "d2"}} {
					b.Field(0).(*array.Int64Builder).Append(r.id)
					b.Field(1).(*array.StringBuilder).Append("old")
					b.Field(2).(*array.StringBuilder).Append(r.day)
				}
				noExtra := b.NewRecordBatch()
				b.Release()
				c.put(writers.AutoKey("old"), noExtra)
				c.assertRows(map[int64]string{
					0: "new d1 0.5", 1: "old d1 1.5", 2: "old d1 2.5", 3: "new d1 3.5", 10: "old d2 null",
				})
			})
			t.Run("partitioned, column added later", func(t *testing.T) {
				// Row 1's file predates extra: it holds none of the
				// missing data columns, and keeps its day all the same.
				c := newTC(t, memURI(t), func(cfg *Config) {
					cfg.WriteMode, cfg.MergeKeys, cfg.PartitionBy, cfg.DeletionVectors, cfg.SchemaEvolution = ModeUpsert, []string{"id"}, []string{"day"}, dv, EvolveAddColumns
				})
				first := c.fullRecord(0, 2)
				c.put(writers.AutoKey("first"), deltalayout.DropColumns(first, []string{"extra"}))
				first.Release()
				c.put(writers.AutoKey("new"), c.fullRecord(5, 1))
				c.put(writers.AutoKey("old"), c.namesRecord([]int64{1, 5, 7}, "old"))
				c.assertRows(map[int64]string{
					0: "new d1 null", 1: "old d1 null", 5: "old d1 5.5", 7: "old null null",
				})
			})
			t.Run("column added later", func(t *testing.T) {
				c := newTC(t, memURI(t), func(cfg *Config) {
					cfg.WriteMode, cfg.MergeKeys, cfg.DeletionVectors, cfg.SchemaEvolution = ModeUpsert, []string{"id"}, dv, EvolveAddColumns
				})
				c.put(writers.AutoKey("first"), c.namesRecord([]int64{0, 1}, "first"))
				wide := c.fullRecord(5, 1)
				noDay := deltalayout.DropColumns(wide, []string{"day"})
				wide.Release()
				c.put(writers.AutoKey("new"), noDay)
				c.put(writers.AutoKey("old"), c.namesRecord([]int64{1, 5, 7}, "old"))
				c.assertRows(map[int64]string{
					0: "first null null", 1: "old null null", 5: "old null 5.5", 7: "old null null",
				})
			})
		})
	}
}

// namesRecord builds rows of writertest.Schema with the given ids and name.
func (c *tc) namesRecord(ids []int64, name string) arrow.RecordBatch {
	b := array.NewRecordBuilder(c.mem, writertest.Schema())
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(name)
	}
	return b.NewRecordBatch()
}

// assertRows reads the table and compares "name day extra" by id (null
// for nulls; day from the partition values, null when unpartitioned).
func (c *tc) assertRows(want map[int64]string) {
	c.t.Helper()
	got := map[int64]string{}
	eachLiveBatch(c.t, c.cfg, c.mem, func(a *deltalog.Add, rec arrow.RecordBatch) {
		day := "null"
		if v := a.PartitionValues["day"]; v != nil {
			day = *v
		}
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		names := rec.Column(rec.Schema().FieldIndices("name")[0]).(*array.String)
		var extra *array.Float64
		if idx := rec.Schema().FieldIndices("extra"); len(idx) == 1 {
			extra = rec.Column(idx[0]).(*array.Float64)
		}
		for i := range int(rec.NumRows()) {
			x := "null"
			if extra != nil && extra.IsValid(i) {
				x = fmt.Sprint(extra.Value(i))
			}
			if _, dup := got[ids.Value(i)]; dup {
				c.t.Errorf("id %d twice", ids.Value(i))
			}
			got[ids.Value(i)] = names.Value(i) + " " + day + " " + x
		}
	})
	if len(got) != len(want) {
		c.t.Errorf("rows %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			c.t.Errorf("id %d: %q, want %q", id, got[id], w)
		}
	}
}
