package kafka

import (
	"bytes"
	"testing"
)

func FuzzParseFrame(f *testing.F) {
	f.Add(appendFrame(nil, record{key: []byte("k"), value: []byte("v"), headers: []header{{name: []byte("h"), value: []byte("x")}}})[8:])
	f.Add(appendFrame(nil, record{dlq: true})[8:])
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
