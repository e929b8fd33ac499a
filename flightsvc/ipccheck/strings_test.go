package ipccheck

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestValidateStringsAgreesWithArrow: on string columns with random values
// (ASCII and multi-byte characters, nulls, slices) and random damage
// (bytes that are not UTF-8, offsets moved inside a character, decreasing,
// negative or out of range, a wrong null count), ValidateColumn's fast
// path accepts exactly what array.ValidateFull accepts.
func TestValidateStringsAgreesWithArrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "b", "Z", "é", "ß", "€", "中", "😀", "", "quite a long run of plain ASCII text"}
	damages := []string{"none", "byte", "split", "decrease", "negative", "beyond", "nullcount"}
	accepted, refused := 0, 0
	for iter := range 3000 {
		var b array.Builder
		large := iter%2 == 1
		if large {
			b = array.NewLargeStringBuilder(memory.DefaultAllocator)
		} else {
			b = array.NewStringBuilder(memory.DefaultAllocator)
		}
		n := 1 + rng.IntN(12)
		for range n {
			if rng.IntN(5) == 0 {
				b.AppendNull()
				continue
			}
			s := ""
			for range rng.IntN(4) {
				s += alphabet[rng.IntN(len(alphabet))]
			}
			b.(interface{ Append(string) }).Append(s)
		}
		arr := b.NewArray()
		b.Release()
		damage := damages[rng.IntN(len(damages))]
		col := damaged(t, arr, damage, large, rng)
		arr.Release()
		if col == nil {
			continue // arrow-go refuses to build it: no stream can carry it
		}
		if lo := rng.IntN(col.Len() + 1); rng.IntN(3) == 0 {
			s := array.NewSlice(col, int64(lo), int64(lo+rng.IntN(col.Len()-lo+1)))
			col.Release()
			col = s
		}
		got := ValidateColumn(col)
		want := arrowValidateFull(col)
		if (got == nil) != (want == nil) {
			t.Fatalf("iteration %d (%s damage, large %v): ValidateColumn says %v, array.ValidateFull %v", iter, damage, large, got, want)
		}
		if got == nil {
			accepted++
		} else {
			refused++
		}
		col.Release()
	}
	if accepted < 500 || refused < 500 {
		t.Fatalf("%d accepted, %d refused: the cases should cover both", accepted, refused)
	}
}

func arrowValidateFull(col arrow.Array) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errPanicked
		}
	}()
	return array.ValidateFull(col)
}

var errPanicked = &panicError{}

type panicError struct{}

func (*panicError) Error() string { return "panicked" }

// damaged returns a copy of arr's data with one kind of damage, or nil
// when arrow-go panics building it.
func damaged(t *testing.T, arr arrow.Array, damage string, large bool, rng *rand.Rand) (out arrow.Array) {
	t.Helper()
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	d := arr.Data()
	bufs := make([]*memory.Buffer, len(d.Buffers()))
	for i, b := range d.Buffers() {
		if b != nil {
			bufs[i] = memory.NewBufferBytes(append([]byte(nil), b.Bytes()...))
		}
	}
	offs := bufs[1].Bytes()
	n := d.Len()
	get := func(i int) int64 {
		if large {
			return int64(binary.LittleEndian.Uint64(offs[i*8:]))
		}
		return int64(int32(binary.LittleEndian.Uint32(offs[i*4:])))
	}
	set := func(i int, v int64) {
		if large {
			binary.LittleEndian.PutUint64(offs[i*8:], uint64(v))
		} else {
			binary.LittleEndian.PutUint32(offs[i*4:], uint32(int32(v)))
		}
	}
	nulls := d.NullN()
	switch damage {
	case "byte":
		if data := bufs[2]; data != nil && data.Len() > 0 {
			data.Bytes()[rng.IntN(data.Len())] = []byte{0xff, 0x80, 0xc3}[rng.IntN(3)]
		}
	case "split":
		i := 1 + rng.IntN(n)
		if i < n && get(i) < get(i+1) {
			set(i, get(i)+1)
		}
	case "decrease":
		i := 1 + rng.IntN(n)
		set(i, get(i-1)-1)
	case "negative":
		set(0, -1)
	case "beyond":
		set(n, get(n)+int64(1+rng.IntN(3)))
	case "nullcount":
		nulls++
	}
	return array.MakeFromData(array.NewData(d.DataType(), n, bufs, nil, nulls, d.Offset()))
}

// TestValidateEmptyStringColumns: a string column of no rows is valid with
// its offsets buffer absent or empty (arrow-go's IPC writer sends none),
// as array.ValidateFull says; the fast path must not refuse it.
func TestValidateEmptyStringColumns(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString} {
		for name, offsets := range map[string]*memory.Buffer{"absent": nil, "empty": memory.NewBufferBytes(nil)} {
			data := array.NewData(dt, 0, []*memory.Buffer{nil, offsets, nil}, nil, 0, 0)
			col := array.MakeFromData(data)
			if err := array.ValidateFull(col); err != nil {
				t.Fatalf("%s offsets %s: arrow refuses it too: %v", dt, name, err)
			}
			if ok, err := validateStrings(col); !ok || err != nil {
				t.Errorf("%s offsets %s: validateStrings = %v, %v; want true, nil", dt, name, ok, err)
			}
			col.Release()
			data.Release()
		}
	}
}

// BenchmarkValidateStrings: a 65,536-row batch's string column of short
// values, ASCII or with a few multi-byte characters.
func BenchmarkValidateStrings(b *testing.B) {
	for _, tc := range []struct{ name, rare string }{{"ascii", "x"}, {"utf8", "é"}} {
		b.Run(tc.name, func(b *testing.B) {
			sb := array.NewStringBuilder(memory.DefaultAllocator)
			for i := range 65_536 {
				s := fmt.Sprintf("user-%d", i%5000)
				if i%100 == 0 {
					s += tc.rare
				}
				sb.Append(s)
			}
			col := sb.NewArray()
			defer col.Release()
			b.SetBytes(int64(col.Data().Buffers()[2].Len()))
			for b.Loop() {
				if err := ValidateColumn(col); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
