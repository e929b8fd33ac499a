package parquetio

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestZstdCompressesStringsWithoutMatches: random strings over a small
// alphabet have no matches for zstd to find, only a skewed byte
// distribution; the codec must still entropy-code them (the fastest level
// alone stores them raw), and its frames decode with parquet-go's codec.
func TestZstdCompressesStringsWithoutMatches(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rng := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, 256<<10)
	for i := range page {
		page[i] = alphabet[rng.IntN(len(alphabet))]
	}
	out, err := fastZstd.Encode(nil, page)
	if err != nil {
		t.Fatal(err)
	}
	// 62 symbols: log2(62)/8 ≈ 0.744 of the input at best.
	if ratio := float64(len(out)) / float64(len(page)); ratio > 0.8 {
		t.Errorf("compressed to %.3f of the input, want <= 0.8 (literals not entropy-coded)", ratio)
	}
	back, err := parquet.Zstd.Decode(nil, out)
	if err != nil || !bytes.Equal(back, page) {
		t.Fatalf("decode: %v, equal %v", err, bytes.Equal(back, page))
	}
}
