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

// TestDictTable: values get indexes in order of first appearance, equal
// values the same index, through the table's growth; the limit ends it.
func TestDictTable(t *testing.T) {
	tab := newDictTable(1)
	var want []string
	for round := range 3 {
		for i := range 5000 {
			v := fmt.Sprintf("value-%d", i*7%5000)
			k, ok := tab.index([]byte(v), 5000)
			if !ok {
				t.Fatalf("round %d: %q refused under the limit", round, v)
			}
			if round == 0 && int(k) == len(want) {
				want = append(want, v)
			}
			if got := string(tab.data[tab.offs[k]:tab.offs[k+1]]); got != v || want[k] != v {
				t.Fatalf("round %d: %q has index %d holding %q", round, v, k, got)
			}
		}
	}
	if len(want) != 5000 || len(tab.offs) != 5001 {
		t.Fatalf("%d distinct values recorded, %d in the table, want 5000", len(want), len(tab.offs)-1)
	}
	if _, ok := tab.index([]byte("one too many"), 5000); ok {
		t.Fatal("a value past the limit was taken")
	}
}
