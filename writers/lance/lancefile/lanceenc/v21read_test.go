package lanceenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// TestFullZipZstdDecoderShared: a full-zip page's values, each
// zstd-compressed on its own, are read with one decoder (one per value
// cost ~7 KiB and ~10 µs each), and each is still held to its stated size.
func TestFullZipZstdDecoderShared(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	const n = 5000
	var data []byte
	offs := []uint64{0}
	for i := range n {
		v := []byte(fmt.Sprintf("value %d", i))
		data = enc.EncodeAll(v, binary.LittleEndian.AppendUint64(data, uint64(len(v))))
		offs = append(offs, uint64(len(data)))
	}
	general := func() *encodings21pb.CompressiveEncoding {
		return &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_General{General: &encodings21pb.General{
			Compression: &encodings21pb.BufferCompression{Scheme: encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD},
			Values:      variableEncoding(32)}}}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	got, err := perValue(NewBudget(1<<30), general(), block{n: n, data: data, offs: offs}, 0)
	runtime.ReadMemStats(&ms)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.data[got.offs[4321]:got.offs[4322]]; string(v) != "value 4321" {
		t.Fatalf("value 4321 decoded as %q", v)
	}
	if per := (ms.TotalAlloc - before) / n; per > 1024 {
		t.Errorf("%d bytes allocated per value, want a shared decoder's few", per)
	}
	// A value stating fewer bytes than its frame holds is refused.
	short := enc.EncodeAll([]byte("twelve bytes"), binary.LittleEndian.AppendUint64(nil, 5))
	if _, err := perValue(NewBudget(1<<30), general(), block{n: 2, data: append(bytes.Clone(data[:offs[1]]), short...),
		offs: []uint64{0, offs[1], offs[1] + uint64(len(short))}}, 0); err == nil {
		t.Error("a value decoding past its stated size was accepted")
	}
}
