package delta

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// negativeOffset returns rows of idSchema whose "str" offsets go
// backwards (0, -3, ...): what flightsvc refuses, handed to the sink
// directly.
func negativeOffset(mem memory.Allocator) arrow.RecordBatch {
	rec := idBatch(mem, idRange(0, 3, "abc")...)
	defer rec.Release()
	str := rec.Column(1).Data()
	offsets := memory.NewBufferBytes(append([]byte(nil), str.Buffers()[1].Bytes()...))
	binary.LittleEndian.PutUint32(offsets.Bytes()[4:], uint32(0xFFFFFFFD))
	bad := array.NewData(str.DataType(), str.Len(), []*memory.Buffer{str.Buffers()[0], offsets, str.Buffers()[2]}, nil, str.NullN(), 0)
	defer bad.Release()
	col := array.MakeFromData(bad)
	defer col.Release()
	return array.NewRecordBatch(rec.Schema(), []arrow.Array{rec.Column(0), col, rec.Column(2)}, rec.NumRows())
}

// A batch that panics the Parquet encoder, a goroutine of the sink that
// gRPC's recovery does not cover, fails its key with an error instead of
// ending the process; the key rolls back and nothing is published. (On
// upsert tables the same batch panics arrow-go's take kernel, on a
// goroutine of arrow-go's own that nothing here can recover: flightsvc's
// validation of every batch is what keeps such batches from the sinks.)
func TestEncoderPanicFailsTheKey(t *testing.T) {
	cfg := testConfig(memURI(t))
	mem := memory.NewGoAllocator()
	w := openWriter(t, cfg, mem)
	ctx := context.Background()
	key := writers.AutoKey("hostile")
	rec := negativeOffset(mem)
	defer rec.Release()
	err := w.Write(ctx, key, rec)
	if err == nil {
		_, err = w.Precommit(ctx, key)
	}
	var pe *writers.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v, want the encoder's panic as an error", err)
	}
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	if recs := readTable(t, cfg, mem); len(recs) != 0 {
		t.Fatalf("%d batches published", len(recs))
	}
	// The writer still works.
	ok := idBatch(mem, idRange(0, 3, "ok")...)
	defer ok.Release()
	commitOne(t, w, writers.AutoKey("after"), ok)
}
