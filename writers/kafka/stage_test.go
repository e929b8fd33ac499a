package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/writers"
)

// frameSeeds are valid frame payloads, one cut short, and ones whose key
// length and header count are set to 2^63.
func frameSeeds() map[string][]byte {
	valid := appendFrame(nil, record{key: []byte("k"), value: []byte("v"), headers: []header{{name: []byte("h"), value: []byte("x")}}})[8:]
	huge := binary.AppendUvarint(nil, 1<<63)
	return map[string][]byte{
		"valid":     valid,
		"dlq":       appendFrame(nil, record{dlq: true})[8:],
		"truncated": valid[:len(valid)-2],
		"key":       append(append([]byte{flagKey}, huge...), 'k'),
		"headers":   append([]byte{0, 0, 0}, huge...),
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := parseFrame(p)
		if err != nil {
			return
		}
		// A frame that parses survives re-encoding unchanged.
		r2, err := parseFrame(appendFrame(nil, r)[8:])
		if err != nil || !bytes.Equal(r2.key, r.key) || !bytes.Equal(r2.value, r.value) || r2.dlq != r.dlq || len(r2.headers) != len(r.headers) {
			t.Fatalf("re-encoding %x: got %+v, %v; want %+v", p, r2, err, r)
		}
	})
}

// TestReadStageAllocationBounded: a staging file whose frame claims 1 GiB
// (the largest length readStage accepts) fails before the frame is
// allocated, as does one cut short.
func TestReadStageAllocationBounded(t *testing.T) {
	frame := appendFrame(nil, record{key: []byte("k"), value: []byte("v")})
	inflated := bytes.Clone(frame)
	binary.LittleEndian.PutUint32(inflated, maxFrame)
	for name, body := range map[string][]byte{"inflated": inflated, "truncated": frame[:len(frame)-1]} {
		file := append([]byte(stageMagic), body...)
		path := filepath.Join(t.TempDir(), "stage")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		d := descriptor{path: path, Size: int64(len(file)), CRC: crc32.Checksum(file, castagnoli), Records: 1}
		var err error
		alloccheck.Below(t, name, func() { err = readStage(d, func(record) error { return nil }) })
		if !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", name, err)
		}
	}
}
