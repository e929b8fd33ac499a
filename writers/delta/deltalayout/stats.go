package deltalayout

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// FileStatsJSON turns the statistics parquetio computed while encoding a
// file of Arrow schema schema into the add.stats JSON, for the columns of
// layout.stats (the table's delta.dataSkipping* properties, which name
// logical columns) only, keyed by the file's (physical) names. The Arrow type
// of each column decides the Delta form of its bounds: date32 is a date,
// a timestamp without zone a timestamp_ntz, a decimal exact text.
func FileStatsJSON(st parquetio.FileStats, schema *arrow.Schema, layout *Layout) (string, error) {
	cols := make([]ColumnStat, 0, len(st.Columns))
	for _, c := range st.Columns {
		if logical := layout.Cols.logicalPath(c.Path); logical == nil || !layout.stats.Has(logical) {
			continue
		}
		cs := ColumnStat{Path: c.Path, NullCount: c.NullCount}
		if c.HasMinMax {
			t := leafType(schema, c.Path)
			cs.Min, cs.Max = statBound(t, c.Min), statBound(t, c.Max)
		}
		cols = append(cols, cs)
	}
	return BuildStats(st.Rows, cols)
}

// statBound converts one parquetio bound to the type BuildStats expects.
func statBound(t arrow.DataType, v any) any {
	if d, ok := t.(*arrow.DictionaryType); ok {
		t = d.ValueType
	}
	switch t := t.(type) {
	case *arrow.Date32Type:
		if tm, ok := v.(time.Time); ok {
			return Date(tm)
		}
	case *arrow.TimestampType:
		if tm, ok := v.(time.Time); ok && t.TimeZone == "" {
			return TimestampNTZ(tm)
		}
	case *arrow.Decimal128Type:
		if s, ok := v.(interface{ String() string }); ok {
			return Decimal(s.String())
		}
	}
	return v
}

// leafType returns the Arrow type of the column at path (struct members
// by name), nil when there is none.
func leafType(schema *arrow.Schema, path []string) arrow.DataType {
	fields := schema.Fields()
	var t arrow.DataType
	for _, name := range path {
		t = nil
		for _, f := range fields {
			if f.Name == name {
				t = f.Type
				break
			}
		}
		if st, ok := t.(*arrow.StructType); ok {
			fields = st.Fields()
		} else {
			fields = nil
		}
	}
	return t
}
