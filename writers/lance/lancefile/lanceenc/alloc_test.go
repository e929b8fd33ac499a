package lanceenc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/zstd"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// TestV21AllocationBounded: 2.1/2.2 pages that claim more than their bytes
// hold fail before allocating it: a constant page repeating a 1 MiB value
// over 2^20 rows, bit-packed chunks of 2^26 64-bit values from 16 bytes,
// an all-null page of 2^26 fixed-size lists and a full-zip value that
// zstd expands to 512 MiB.
func TestV21AllocationBounded(t *testing.T) {
	// 512 MiB of zeros compressed as one full-zip value (streamed: the
	// frame does not state its size), led by its size as Lance writes it,
	// and led by a size of 1 KiB.
	var frame bytes.Buffer
	w, _ := zstd.NewWriter(&frame, zstd.WithEncoderConcurrency(1))
	zeros := make([]byte, 1<<20)
	for range 512 {
		w.Write(zeros)
	}
	w.Close()
	zstdValue := func(bud *Budget, stated uint64) error {
		v := append(binary.LittleEndian.AppendUint64(nil, stated), frame.Bytes()...)
		enc := &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_General{General: &encodings21pb.General{
			Compression: &encodings21pb.BufferCompression{Scheme: encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD},
			Values:      variableEncoding(32)}}}
		_, err := perValue(bud, enc, block{n: 1, data: v, offs: []uint64{0, uint64(len(v))}}, 0)
		return err
	}
	cases := map[string]func(bud *Budget) error{
		"constant page": func(bud *Budget) error {
			v := block{n: 1, data: bytes.Repeat([]byte{'x'}, 1<<20), offs: []uint64{0, 1 << 20}}
			_, err := repeat(bud, v, 1<<20)
			return err
		},
		"bit-packed chunk": func(bud *Budget) error {
			_, err := inlineUnpack(bud, 64, make([]byte, 16), 1<<26)
			return err
		},
		"all-null page": func(bud *Budget) error {
			_, err := nullValues(bud, arrow.FixedSizeListOf(1024, arrow.PrimitiveTypes.Float32), 1<<26)
			return err
		},
		"full-zip zstd value":               func(bud *Budget) error { return zstdValue(bud, 512<<20) },
		"full-zip zstd value, 1 KiB stated": func(bud *Budget) error { return zstdValue(bud, 1<<10) },
	}
	for name, run := range cases {
		var err error
		alloccheck.Below(t, name, func() { err = run(NewBudget(1 << 10)) })
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
