package parquetio

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestColumnResolution: a column asked for by field id is the file's
// column of that id whatever its name, and reads under the name asked
// for; one the file has only under another case reads too (as Spark
// resolves Parquet columns), two such are ErrInvalid; a file with field
// ids lacking the id lacks the column.
func TestColumnResolution(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	field := func(name string, id int) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true,
			Metadata: arrow.NewMetadata([]string{FieldIDKey}, []string{strconv.Itoa(id)})}
	}
	file := func(fields ...arrow.Field) []byte {
		b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
		defer b.Release()
		for i := range fields {
			b.Field(i).(*array.Int64Builder).Append(int64(10 * (i + 1)))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		data, _ := writeFile(t, rec.Schema(), Options{}, rec)
		return data
	}
	read := func(data []byte, opts ReadOptions) (string, error) {
		rd, err := ReadFile(t.Context(), bytesReader(data), int64(len(data)), mem, opts)
		if err != nil {
			return "", err
		}
		defer rd.Release()
		var out []string
		for rd.Next() {
			rec := rd.RecordBatch()
			for i, f := range rec.Schema().Fields() {
				out = append(out, fmt.Sprintf("%s=%d", f.Name, rec.Column(i).(*array.Int64).Value(0)))
			}
		}
		return strings.Join(out, ","), rd.Err()
	}
	withIDs := file(field("a", 1), field("b", 2))
	for _, tc := range []struct {
		name string
		data []byte
		opts ReadOptions
		want string
	}{
		{"by id, other name", withIDs, ReadOptions{Columns: []string{"renamed"}, FieldIDs: []int32{2}, SkipMissing: true}, "renamed=20"},
		{"by id, not by name", withIDs, ReadOptions{Columns: []string{"a"}, FieldIDs: []int32{7}, SkipMissing: true}, ""},
		{"no id: by name", withIDs, ReadOptions{Columns: []string{"b", "a"}, FieldIDs: []int32{-1, -1}}, "a=10,b=20"},
		{"case folded", withIDs, ReadOptions{Columns: []string{"B"}, SkipMissing: true}, "B=20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := read(tc.data, tc.opts)
			if err != nil || got != tc.want {
				t.Fatalf("read %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("ambiguous case", func(t *testing.T) {
		_, err := read(file(field("x", 1), field("X", 2)), ReadOptions{Columns: []string{"x1"}, SkipMissing: true})
		if err != nil {
			t.Fatalf("unrelated name: %v", err)
		}
		_, err = read(file(field("xy", 1), field("XY", 2)), ReadOptions{Columns: []string{"Xy"}, SkipMissing: true})
		assertInvalid(t, err, "case folding")
	})
}
