package parquetio

import (
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// valueLayout mirrors the fields of parquet.Value (parquet-go v0.32) so
// that the shredding loops can give a value its levels with two stores.
// parquet.Value.Level range-checks its arguments and is too large to
// inline: a call per value was a tenth of the encoding CPU of nullable
// columns. layoutMatches verifies the mirror against Level once; should a
// parquet-go release change the struct, at falls back to Level.
type valueLayout struct {
	ptr             *byte
	u64             uint64
	kind            int8
	definitionLevel byte
	repetitionLevel byte
	columnIndex     uint16 // stored complemented, as parquet-go does
}

var layoutMatches = checkLayout()

// checkLayout compares a value leveled through the mirror with the same
// value leveled by parquet-go.
func checkLayout() bool {
	if unsafe.Sizeof(parquet.Value{}) != unsafe.Sizeof(valueLayout{}) {
		return false
	}
	want := parquet.Int64Value(-7).Level(3, 5, 300)
	got := parquet.Int64Value(-7)
	levels{rep: 3, def: 5, column: 300}.store(&got)
	return parquet.Equal(got, want) && got.RepetitionLevel() == 3 && got.DefinitionLevel() == 5 && got.Column() == 300
}

// levels are the repetition and definition levels and the column index
// of a value, checked for range once (by newLevels) rather than per value.
type levels struct {
	rep, def uint8
	column   uint16
}

// newLevels returns the levels of values of Parquet column column. It
// panics as parquet.Value.Level does when column is out of range.
func newLevels(rep, def uint8, column int) levels {
	parquet.Value{}.Level(int(rep), int(def), column)
	return levels{rep: rep, def: def, column: uint16(column)}
}

// set gives v the levels.
func (lv levels) set(v *parquet.Value) {
	if layoutMatches {
		lv.store(v)
		return
	}
	*v = v.Level(int(lv.rep), int(lv.def), int(lv.column))
}

// setAll gives every value of vals the levels; nothing to do at level 0
// (the zero levels of a required column).
func (lv levels) setAll(vals []parquet.Value) {
	if lv.rep == 0 && lv.def == 0 {
		return
	}
	if !layoutMatches {
		for i := range vals {
			vals[i] = vals[i].Level(int(lv.rep), int(lv.def), int(lv.column))
		}
		return
	}
	for i := range vals {
		lv.store(&vals[i])
	}
}

// store writes the levels through the mirror.
func (lv levels) store(v *parquet.Value) {
	p := (*valueLayout)(unsafe.Pointer(v))
	p.repetitionLevel, p.definitionLevel, p.columnIndex = lv.rep, lv.def, ^lv.column
}
