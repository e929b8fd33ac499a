package deltalog

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// A checkpoint's string columns (add.path above all: one page spans many
// 4096-row batches) were DELTA_LENGTH_BYTE_ARRAY, parquet-go's default,
// which Spark's vectorized reader refuses or garbles (SPARK-52240). Every
// chunk must be PLAIN or dictionary encoded; partition keys, repeated on
// every row, are dictionary encoded.
func TestCheckpointEncodings(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s := create(t, store, map[string]string{"delta.checkpointInterval": "1000"})
		var acts []Action
		for i := range 5000 {
			acts = append(acts, addAction(fmt.Sprintf("part-%05d", i), fmt.Sprint("d", i%7)))
		}
		acts = append(acts, txnAction("w", 1))
		if _, err := Commit(ctx, store, s, acts, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := s.Update(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Commit(ctx, store, s, []Action{{Remove: s.Files()[0].Remove(timeNowMs(), true)}}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		if s, err = s.Update(ctx, store); err != nil {
			t.Fatal(err)
		}
		if err := WriteCheckpoint(ctx, store, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		data, err := store.Get(ctx, CheckpointKey(s.Version))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		enc := map[string][]format.Encoding{}
		for _, rg := range f.Metadata().RowGroups {
			for _, c := range rg.Columns {
				col := strings.Join(c.MetaData.PathInSchema, ".")
				enc[col] = append(enc[col], c.MetaData.Encoding...)
			}
		}
		for col, encs := range enc {
			for _, e := range encs {
				if e != format.Plain && e != format.RLE && e != format.RLEDictionary {
					t.Errorf("checkpoint column %s has encoding %s, want PLAIN or RLE_DICTIONARY", col, e)
				}
			}
		}
		for _, col := range []string{"add.partitionValues.key_value.key", "add.partitionValues.key_value.value"} {
			if !slices.Contains(enc[col], format.RLEDictionary) {
				t.Errorf("checkpoint column %s: encodings %v, want RLE_DICTIONARY", col, enc[col])
			}
		}
		got, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if got.NumFiles() != 4999 || len(got.Tombstones()) != 1 {
			t.Fatalf("from checkpoint: %d files, %d tombstones; want 4999, 1", got.NumFiles(), len(got.Tombstones()))
		}
	})
}

// A tombstone whose extendedFileMetadata says partitionValues is present
// keeps an empty map in checkpoints too, also when its commit lacked it
// (Quiver's before it always wrote {}).
func TestCheckpointRemovePartitionValues(t *testing.T) {
	for _, extended := range []bool{false, true} {
		rec := checkpointRecord(memory.DefaultAllocator, []Action{{Remove: &Remove{Path: "x.parquet", ExtendedFileMetadata: extended}}})
		pv := rec.Column(cpRemoveCol).(*array.Struct).Field(4) // remove.partitionValues
		if got := pv.IsValid(0); got != extended {
			t.Errorf("extendedFileMetadata %v: partitionValues present = %v", extended, got)
		}
		rec.Release()
	}
}
