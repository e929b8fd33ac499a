package lancefile

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile/lanceenc"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// TestEmptyStructRefused: a struct without fields has no leaf column in
// 2.1 and later; writing one is refused naming it (its reader panicked).
func TestEmptyStructRefused(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "empty", Type: arrow.StructOf(), Nullable: true}}, nil)
	for _, minor := range []uint16{1, 2} {
		if err := CheckFormatTypes(s, minor); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("2.%d: %v, want ErrInvalid naming the column", minor, err)
		}
	}
}

// TestDictionaryBelowTopRefused: a dictionary is a top-level column's type
// only. Inside a fixed-size list its indices alone were written, without
// the dictionary, and pylance then failed on every scan of the dataset.
func TestDictionaryBelowTopRefused(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	for name, typ := range map[string]arrow.DataType{
		"fixed_size_list": arrow.FixedSizeListOf(2, dt),
		"list":            arrow.ListOf(dt),
		"struct":          arrow.StructOf(arrow.Field{Name: "d", Type: dt, Nullable: true}),
	} {
		s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: typ, Nullable: true}}, nil)
		for _, minor := range []uint16{0, 1, 2} {
			if err := CheckFormatTypes(s, minor); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"v.`) || !strings.Contains(err.Error(), "dictionary") {
				t.Errorf("%s 2.%d: %v, want the dictionary refused naming the column", name, minor, err)
			}
		}
		if _, err := FromArrow(s); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"v`) {
			t.Errorf("%s: FromArrow %v, want the dictionary refused", name, err)
		}
	}
}

// TestReadRefusalsInvalid: what the 2.1+ reader does not read is refused
// as invalid input, without panicking: a variable packed struct inside a
// struct, a struct without fields inside a struct or list (mergeLeaves
// indexed its missing leaves), and blob pages inside lists or structs.
func TestReadRefusalsInvalid(t *testing.T) {
	packed := arrow.NewMetadata([]string{"lance-encoding:packed"}, []string{"true"})
	for name, typ := range map[string]arrow.DataType{
		"variable packed in struct": arrow.StructOf(arrow.Field{Name: "in", Type: arrow.StructOf(
			arrow.Field{Name: "s", Type: arrow.BinaryTypes.String}), Metadata: packed}),
		"empty struct in struct": arrow.StructOf(arrow.Field{Name: "e", Type: arrow.StructOf(), Nullable: true},
			arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int64}),
		"empty struct in list": arrow.ListOf(arrow.StructOf()),
		"empty struct":         arrow.StructOf(),
	} {
		t.Run(name, func(t *testing.T) {
			as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: typ, Nullable: true}}, nil)
			s, err := FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.leaves(s.TopLevel()[0], typ); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("leaves = %v, want ErrInvalid", err)
			}
		})
	}
	f := &FileReader{}
	for _, layers := range [][]encodings21pb.RepDefLayer{
		{encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM, encodings21pb.RepDefLayer_REPDEF_NULLABLE_LIST},
		{encodings21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM, encodings21pb.RepDefLayer_REPDEF_NULLABLE_ITEM},
	} {
		l := &encodings21pb.BlobLayout{Layers: layers}
		if _, err := f.readBlobPage(nil, lanceenc.NewBudget(1<<20), arrow.BinaryTypes.LargeBinary, l, nil, 0); !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("blob page of levels %v: %v, want ErrInvalid", layers, err)
		}
	}
}

// TestNestedDictionaryTooWide: a dictionary page inside a struct or list
// holding more distinct values than its indices address is refused (the
// builder wrapped int8 indices past 127 into negative ones).
func TestNestedDictionaryTooWide(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vs := make([]string, 200)
	for i := range vs {
		vs[i] = fmt.Sprint("v", i)
	}
	plain := strs(mem, vs...)
	if _, err := lanceenc.DictEncode(mem, dictPageType, plain); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "200") {
		t.Fatalf("200 distinct values under int8 indices: %v", err)
	}
}
