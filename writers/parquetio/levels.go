package parquetio

import "github.com/parquet-go/parquet-go"

// levels are the repetition and definition levels and the column index
// of a value. They are set in place with parquet-go's setters, which
// inline: parquet.Value.Level does not, and a call per value was a tenth
// of the encoding CPU of nullable columns.
type levels struct {
	rep, def uint8
	column   uint16
}

// newLevels returns the levels of values of Parquet column column. It
// panics as parquet.Value.Level does when column is out of range, which
// NewWriter rules out (maxColumns).
func newLevels(rep, def uint8, column int) levels {
	parquet.Value{}.Level(int(rep), int(def), column)
	return levels{rep: rep, def: def, column: uint16(column)}
}

// setAll gives every value of vals the levels; nothing to do at level 0
// (the zero levels of a required column).
func (lv levels) setAll(vals []parquet.Value) {
	if lv.rep == 0 && lv.def == 0 {
		return
	}
	for i := range vals {
		v := &vals[i]
		v.SetRepetitionLevel(int(lv.rep))
		v.SetDefinitionLevel(int(lv.def))
		v.SetColumnIndex(int(lv.column))
	}
}
