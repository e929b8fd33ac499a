package lanceenc

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// page returns rows values drawn at random from n distinct strings.
func page(rows, n int) ([]uint64, []byte) {
	r := rand.New(rand.NewPCG(uint64(rows), uint64(n)))
	offs, data := []uint64{0}, []byte{}
	for range rows {
		data = fmt.Appendf(data, "user-%010x", r.IntN(n))
		offs = append(offs, uint64(len(data)))
	}
	return offs, data
}

// The estimate from a sample tells medium-cardinality columns from
// unique ones, which a sample of 1,024 cannot: 20,000 user names become a
// dictionary page, unique values do not.
func TestMediumCardinalityIsADictionary(t *testing.T) {
	const rows = 200_000
	for _, c := range []struct {
		distinct int
		dict     bool
	}{{16, true}, {20_000, true}, {rows * 100, false}} {
		offs, data := page(rows, c.distinct)
		est := estimateDistinct(offs, data)
		if c.distinct <= rows && (float64(est) < 0.8*float64(c.distinct) || float64(est) > 1.25*float64(c.distinct)) {
			t.Errorf("%d distinct values estimated at %d", c.distinct, est)
		}
		if _, dict := dictionaryEncode(arrow.BinaryTypes.String, offs, data); (dict != nil) != c.dict {
			t.Errorf("%d distinct values of %d: dictionary %v, want %v", c.distinct, rows, dict != nil, c.dict)
		}
	}
}
