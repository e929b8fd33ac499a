package journal

import (
	"testing"
)

// seeds are valid, torn, zeroed and impossible frames.
func seeds() [][]byte {
	one := appendFrame(nil, Record{Type: 1, Payload: []byte(`{"writer":"w","epoch":1}`)})
	two := appendFrame(append([]byte(nil), one...), Record{Type: 6, Payload: nil})
	return [][]byte{
		one,
		two,
		one[:len(one)-3],
		make([]byte, 32),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1},
		{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1}, // 64 MiB, one byte present
		append(appendHeader(nil, flagSnapshot), two...),
	}
}

// decodeAll decodes frames until the first error, checking each one.
func decodeAll(t *testing.T, data []byte) {
	for off := 0; off < len(data); {
		r, n, err := decodeFrame(data[off:])
		if err != nil {
			return
		}
		if n <= 0 || off+n > len(data) || n%8 != 0 || len(r.Payload) > MaxRecordBytes {
			t.Fatalf("frame at %d: size %d, payload %d, data %d", off, n, len(r.Payload), len(data))
		}
		off += n
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeAll(t, data)
		// Whole-segment reading must not panic either, whatever the bytes.
		readFrames("fuzz", append(appendHeader(nil, flagSnapshot), data...), true)
		readFrames("fuzz", data, false)
	})
}

// TestDecodeDoesNotAllocate: decoding slices its input, so hostile lengths
// cannot make it allocate.
func TestDecodeDoesNotAllocate(t *testing.T) {
	for i, s := range seeds() {
		if n := testing.AllocsPerRun(10, func() { decodeAll(t, s) }); n != 0 {
			t.Fatalf("seed %d: %v allocations", i, n)
		}
	}
}
