package parquetio

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// withFooterRows returns data with its footer's num_rows set to rows (the
// row groups unchanged), as a hostile or corrupt file may claim.
func withFooterRows(t *testing.T, data []byte, rows int64) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - n
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[start:len(data)-8], &meta); err != nil {
		t.Fatal(err)
	}
	meta.NumRows = rows
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out := append(slices.Clone(data[:start]), enc...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
	return append(out, "PAR1"...)
}

// TestRowsOnlyHostileCount: the rows-only read (every selected column
// missing) counts the rows of the row groups; a footer claiming another
// count (2^60 rows for 50) is a corrupt file (ErrInvalid), not 2^60 rows
// produced until the caller gives up. And the read ends with its ctx.
func TestRowsOnlyHostileCount(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := allTypesSchema()
	rec := randomBatch(t, mem, rand.New(rand.NewPCG(3, 4)), schema, 50, 0.1)
	data, _ := writeFile(t, schema, Options{}, rec)
	rec.Release()
	missing := ReadOptions{Columns: []string{"nope"}, SkipMissing: true, BatchRows: 1}

	t.Run("footer claims 2^60 rows", func(t *testing.T) {
		bad := withFooterRows(t, data, 1<<60)
		rd, err := ReadFile(t.Context(), bytesReader(bad), int64(len(bad)), mem, missing)
		if err == nil {
			defer rd.Release()
			var batches int
			for rd.Next() {
				if batches++; batches > 1000 {
					t.Fatal("read more than 1000 one-row batches of a 50-row file")
				}
			}
			err = rd.Err()
		}
		assertInvalid(t, err, "rows")
	})
	t.Run("ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		rd, err := ReadFile(ctx, bytesReader(data), int64(len(data)), mem, missing)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Release()
		if !rd.Next() {
			t.Fatalf("no first batch: %v", rd.Err())
		}
		cancel()
		if rd.Next() {
			t.Fatal("a batch after ctx ended")
		}
		if !errors.Is(rd.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", rd.Err())
		}
	})
}
