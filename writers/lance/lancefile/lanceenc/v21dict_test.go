package lanceenc

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDictionaryNullValues: an index pointing at a null dictionary value
// is written as a null index, as Lance keeps dictionary nulls.
func TestDictionaryNullValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ib := array.NewInt8Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int8{9, 0, 1, 0, 0}, []bool{true, true, true, false, true})
	vb := array.NewStringBuilder(mem)
	defer vb.Release()
	vb.AppendValues([]string{"a", ""}, []bool{true, false})
	idx, vals := ib.NewArray(), vb.NewArray()
	defer idx.Release()
	defer vals.Release()
	sl := array.NewSlice(idx, 1, 5) // indices 0, 1, null, 0
	defer sl.Release()
	d := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, sl, vals)
	defer d.Release()
	got := dictIndices(d, nil)
	defer got.Release()
	want := []bool{true, false, false, true}
	for i, v := range want {
		if got.IsValid(i) != v || v && got.(*array.Int8).Value(i) != 0 {
			t.Errorf("index %d: valid %v (%v), want valid %v and 0", i, got.IsValid(i), got, v)
		}
	}
}
