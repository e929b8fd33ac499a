package lanceenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// packedRow is a variable packed struct row of fields, each given as its
// bytes: fixed-width ones as they are, others after a 32-bit length.
func packedRow(fields ...any) []byte {
	var out []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int32:
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		case string:
			out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		case []byte: // a nested row
			out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		}
	}
	return out
}

// TestVariablePackedRows: rows of a variable packed struct (an int32, a
// string, a nested struct of an int32 and a string) split into the
// struct's fields, null and empty rows included; rows whose lengths point
// past the row, that end inside a field or leave bytes over are refused.
func TestVariablePackedRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	inner := arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})
	st := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "in", Type: inner})
	rows := func(vs ...[]byte) *array.LargeBinary {
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
		defer b.Release()
		for _, v := range vs {
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(v)
			}
		}
		return b.NewArray().(*array.LargeBinary)
	}
	good := rows(packedRow(int32(7), "seven", packedRow(int32(70), "x")), nil, packedRow(int32(-1), "", packedRow(int32(0), "")))
	defer good.Release()
	got, err := UnpackVarStruct(NewBudget(1<<20), st, good)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if err := array.ValidateFull(got); err != nil {
		t.Fatal(err)
	}
	if g, w := got.String(), `{[7 (null) -1] ["seven" (null) ""] {[70 (null) 0] ["x" (null) ""]}}`; g != w {
		t.Errorf("got %s\nwant %s", g, w)
	}
	// Null rows of a struct of a 16 MiB field: their zeroes are charged.
	wide := arrow.StructOf(arrow.Field{Name: "b", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16 << 20}}, arrow.Field{Name: "s", Type: arrow.BinaryTypes.String})
	nulls := rows(nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)
	if a, err := UnpackVarStruct(NewBudget(1<<20), wide, nulls); err == nil || !strings.Contains(err.Error(), "limit") {
		if a != nil {
			a.Release()
		}
		t.Errorf("17 null rows of 16 MiB each: %v", err)
	}
	nulls.Release()
	row := packedRow(int32(7), "seven", packedRow(int32(70), "x"))
	for name, bad := range map[string][]byte{
		"length past the row": binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 1<<30),
		"ends inside a field": row[:2],
		"bytes left over":     append(bytes.Clone(row), 0),
		"nested length past":  packedRow(int32(7), "seven", []byte{1, 2}),
	} {
		r := rows(bad)
		if a, err := UnpackVarStruct(NewBudget(1<<20), st, r); err == nil {
			a.Release()
			t.Errorf("%s: accepted", name)
		}
		r.Release()
	}
}

// TestVariablePackedNullRowsCharged: null rows of a packed struct of 200
// string fields cost each field an offset (and its 32-bit copy) though
// the file holds nothing for them: 100,000 of them are charged 240 MB,
// refused under a smaller budget.
func TestVariablePackedNullRowsCharged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := make([]arrow.Field, 200)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprint("s", i), Type: arrow.BinaryTypes.String}
	}
	st := arrow.StructOf(fields...)
	const n = 100_000
	rows := array.MakeArrayOfNull(mem, arrow.BinaryTypes.LargeBinary, n).(*array.LargeBinary)
	defer rows.Release()
	const want = n * 200 * 12
	if a, err := UnpackVarStruct(&Budget{unbacked: want - 1}, st, rows); err == nil || !strings.Contains(err.Error(), "limit") {
		if a != nil {
			a.Release()
		}
		t.Fatalf("100,000 null rows of 200 string fields under a %d-byte budget: %v", want-1, err)
	}
	bud := &Budget{unbacked: 1 << 30}
	a, err := UnpackVarStruct(bud, st, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if spent := 1<<30 - bud.unbacked; spent < want {
		t.Errorf("charged %d bytes, want at least %d", spent, want)
	}
}
