package deltalayout

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestColumnMapRename: logical names become physical ones with field ids
// and back; row tracking's materialized columns pass unchanged; a column
// no table column maps to is left out when reading and refused when
// writing.
func TestColumnMapRename(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[
		{"name":"id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-id"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	m := NewColumnMap(map[string]string{deltalog.ColumnMappingModeKey: "name", "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-x"}, schema)
	names := func(rec arrow.RecordBatch) string {
		var out []string
		for _, f := range rec.Schema().Fields() {
			id, _ := f.Metadata.GetValue("PARQUET:field_id")
			out = append(out, f.Name+"#"+id)
		}
		return strings.Join(out, ",")
	}
	in := int64Batch(mem, "id", "_row-id-col-x")
	defer in.Release()
	phys, err := m.ToPhysical(in)
	if err != nil {
		t.Fatal(err)
	}
	defer phys.Release()
	if got := names(phys); got != "col-id#1,_row-id-col-x#" {
		t.Errorf("physical: %s", got)
	}
	file := int64Batch(mem, "col-id", "col-dropped", "_row-id-col-x")
	defer file.Release()
	logical, err := m.toLogical(context.Background(), mem, file)
	if err != nil {
		t.Fatal(err)
	}
	defer logical.Release()
	if got := names(logical); got != "id#,_row-id-col-x#" {
		t.Errorf("logical: %s", got)
	}
	unknown := int64Batch(mem, "nope")
	defer unknown.Release()
	if _, err := m.ToPhysical(unknown); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("toPhysical of an unknown column: %v, want ErrInvalid", err)
	}
}
