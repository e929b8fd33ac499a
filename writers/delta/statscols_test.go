package delta

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// Data files carry statistics for the columns the table's
// delta.dataSkippingStatsColumns or delta.dataSkippingNumIndexedCols
// select (the first 32 by default), whichever mode writes them.
func TestStatsHonourTableProperties(t *testing.T) {
	fields := slices.Clone(writertest.Schema().Fields())
	for i := range 33 {
		fields = append(fields, arrow.Field{Name: fmt.Sprint("c", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	wide := arrow.NewSchema(fields, nil)
	cases := []struct {
		name string
		conf map[string]string
		mode string
		want []string // columns with nullCount
	}{
		{"default: 32 columns", nil, ModeAppend, append([]string{"id", "name"}, names("c", 30)...)},
		{"num indexed 1", map[string]string{"delta.dataSkippingNumIndexedCols": "1"}, ModeAppend, []string{"id"}},
		{"num indexed -1", map[string]string{"delta.dataSkippingNumIndexedCols": "-1"}, ModeOverwrite, append([]string{"id", "name"}, names("c", 33)...)},
		{"stats columns", map[string]string{"delta.dataSkippingStatsColumns": "name, c32", "delta.dataSkippingNumIndexedCols": "1"}, ModeAppend, []string{"c32", "name"}},
		{"upsert", map[string]string{"delta.dataSkippingNumIndexedCols": "2"}, ModeUpsert, []string{"id", "name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(memURI(t), func(cfg *Config) {
				cfg.WriteMode = c.mode
				if c.mode == ModeUpsert {
					cfg.MergeKeys = []string{"id"}
				}
			})
			if _, err := deltalog.Create(t.Context(), tableBucket(t, cfg), wide, nil, c.conf); err != nil {
				t.Fatal(err)
			}
			mem := checkedMem(t)
			w := openWriter(t, cfg, mem)
			b := array.NewRecordBuilder(mem, wide)
			for i := range 3 {
				for j := range wide.NumFields() {
					switch fb := b.Field(j).(type) {
					case *array.Int64Builder:
						fb.Append(int64(i))
					case *array.StringBuilder:
						fb.Append("x")
					}
				}
			}
			rec := b.NewRecordBatch()
			b.Release()
			err := w.Write(t.Context(), writers.AutoKey("a"), rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			d, err := w.Precommit(t.Context(), writers.AutoKey("a"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Commit(t.Context(), writers.AutoKey("a"), []writers.Descriptor{d}); err != nil {
				t.Fatal(err)
			}
			files := snapshot(t, cfg).Files()
			if len(files) == 0 {
				t.Fatal("no file")
			}
			for _, a := range files {
				st, err := deltalog.ParseStats(a.Stats)
				if err != nil {
					t.Fatal(err)
				}
				got := slices.Sorted(maps.Keys(st.NullCount))
				want := slices.Sorted(slices.Values(c.want))
				if st.NumRecords != 3 || !slices.Equal(got, want) {
					t.Errorf("file %s: %d records, nullCount for %v, want 3 and %v", a.Path, st.NumRecords, got, want)
				}
				if _, ok := st.Min(want[0]); !ok && want[0] != "name" {
					t.Errorf("file %s: no minValues for %s", a.Path, want[0])
				}
			}
		})
	}
}

// names returns prefix0 … prefix(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}
