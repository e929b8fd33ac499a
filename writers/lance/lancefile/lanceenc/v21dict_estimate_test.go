package lanceenc

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// The estimate from a sample tells cardinalities apart (within a quarter),
// and a page is a dictionary where pylance 14 makes one: 16 or 1,000
// categories of 200,000 values are; 2,200 values (over the limit of
// 2,050 for pages of 200,000, though the sample reads fewer: the map
// decides), 20,000 user names (FSST in pylance's file) and unique values
// are not.
func TestDictionaryAsPylanceDecides(t *testing.T) {
	const rows = 200_000
	for _, c := range []struct {
		distinct int
		dict     bool
	}{{16, true}, {1000, true}, {2200, false}, {20_000, false}, {rows * 100, false}} {
		offs, data := page(rows, c.distinct)
		est, _ := estimateDistinct(pageStringsOfBytes(offs, data), rows)
		if c.distinct <= rows && (float64(est) < 0.8*float64(c.distinct) || float64(est) > 1.25*float64(c.distinct)) {
			t.Errorf("%d distinct values estimated at %d", c.distinct, est)
		}
		if _, dict := dictionaryEncode(arrow.BinaryTypes.String, pageStringsOfBytes(offs, data)); (dict != nil) != c.dict {
			t.Errorf("%d distinct values of %d: dictionary %v, want %v", c.distinct, rows, dict != nil, c.dict)
		}
		if _, over := estimateDistinct(pageStringsOfBytes(offs, data), dictMaxDistinct(rows)); c.distinct == 2200 && over {
			t.Errorf("2,200 distinct values of %d read as over the limit before the map decided", rows)
		}
	}
}

// The first look (firstLookDistinct) ends the estimate for values nearly
// all distinct (unique ones, 20,000 names) and never for a page a
// dictionary suits, however it is ordered: up to limit distinct values at
// random, sorted, or cycling with a period a stride sample would read as
// all distinct. Sorted and cycling pages get their dictionary (a stride
// sample meeting every one of 2,550 sorted values estimates 3,950).
func TestEstimateFirstLook(t *testing.T) {
	limit := dictMaxDistinct(65_536)
	seed := maphash.MakeSeed()
	names := 0
	for k := range 10 {
		rows := 65_536 + 7*k
		value := func(v int) []byte { return fmt.Appendf(nil, "sensor-%06d", v) }
		arranged := func(name string, of func(i int) int) {
			t.Helper()
			offs, data := []uint64{0}, []byte{}
			for i := range rows {
				data = append(data, value(of(i))...)
				offs = append(offs, uint64(len(data)))
			}
			if readsMostlyDistinct(pageStringsOfBytes(offs, data), limit, seed) {
				t.Errorf("%d rows, %s: read as mostly distinct (limit %d)", rows, name, limit)
			}
			if _, dict := dictionaryEncode(arrow.BinaryTypes.String, pageStringsOfBytes(offs, data)); dict == nil {
				t.Errorf("%d rows, %s: no dictionary (limit %d)", rows, name, limit)
			}
		}
		for _, distinct := range []int{limit / 2, limit} {
			offs, data := page(rows, distinct)
			if readsMostlyDistinct(pageStringsOfBytes(offs, data), limit, seed) {
				t.Errorf("%d rows of %d distinct values at random: read as mostly distinct", rows, distinct)
			}
			arranged(fmt.Sprintf("%d values sorted", distinct), func(i int) int { return i * distinct / rows })
		}
		for _, period := range []int{601, 1000, limit - 1} {
			arranged(fmt.Sprintf("%d values cycling", period), func(i int) int { return i % period })
		}
		offs, data := page(rows, 1<<40)
		if !readsMostlyDistinct(pageStringsOfBytes(offs, data), limit, seed) {
			t.Errorf("%d unique values: not read as mostly distinct", rows)
		}
		// 20,000 names read about 505 distinct of 512 against a bound of
		// 499: nearly always caught (else the stride sample decides).
		if offs, data := page(rows, 20_000); readsMostlyDistinct(pageStringsOfBytes(offs, data), limit, seed) {
			names++
		}
	}
	if names < 8 {
		t.Errorf("pages of 20,000 names read as mostly distinct %d times of 10", names)
	}
}

// readsMostlyDistinct reports whether the first look ends a page's
// estimate as over the limit.
func readsMostlyDistinct(p *pageStrings, limit int, seed maphash.Seed) bool {
	est, looked := firstLookDistinct(p, limit, seed)
	return looked && est > 4*limit
}

// A first look that reads few distinct values is the estimate, without
// the stride sample, and more do not end it; values it did not meet are
// still counted by the map:
// a page of 16 categories with one distinct value on every 32nd row (4,096
// of them, over the limit of 2,550, which a stride sample of every 32nd
// row would read whole) gets no dictionary.
func TestEstimateFirstLookFew(t *testing.T) {
	const rows = 131_072
	limit := dictMaxDistinct(rows)
	offs, data := page(rows, 16)
	if est, over := estimateDistinct(pageStringsOfBytes(offs, data), limit); over || est < 14 || est > 18 {
		t.Errorf("16 categories: estimated %d, over %v", est, over)
	}
	offs, data = categoriesAndRare(rows, 16)
	if est, over := estimateDistinct(pageStringsOfBytes(offs, data), limit); over || est > fewCategories {
		t.Errorf("16 categories and 4,096 rare values: estimated %d, over %v; want the first look's few", est, over)
	}
	if _, dict := dictionaryEncode(arrow.BinaryTypes.String, pageStringsOfBytes(offs, data)); dict != nil {
		t.Errorf("16 categories and 4,096 rare values (limit %d): a dictionary of %d", limit, dict.n)
	}
	// 200 categories are more than a first look ends the estimate with:
	// the stride sample reads the rare values and refuses the page.
	offs, data = categoriesAndRare(rows, 200)
	if est, over := estimateDistinct(pageStringsOfBytes(offs, data), limit); !over {
		t.Errorf("200 categories and 4,096 rare values: estimated %d, not over the limit of %d", est, limit)
	}
}

// categoriesAndRare is a page of rows values: a distinct one on every
// 32nd row, one of n categories on the others.
func categoriesAndRare(rows, n int) ([]uint64, []byte) {
	offs, data := []uint64{0}, []byte{}
	for i := range rows {
		if i%32 == 0 {
			data = fmt.Appendf(data, "rare-%010d", i)
		} else {
			data = fmt.Appendf(data, "user-%010x", i%n)
		}
		offs = append(offs, uint64(len(data)))
	}
	return offs, data
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

// TestPageStringsInPlace: a page's dictionary built from its chunks in
// place (several chunks, sliced, with nulls, string and large string) is
// the one built from the values gathered into one buffer.
func TestPageStringsInPlace(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString} {
		var vals []arrow.Array
		rows := 0
		for c := range 3 {
			b := array.NewBuilder(memory.DefaultAllocator, dt)
			for i := range 300 {
				switch {
				case i%17 == 0:
					b.AppendNull()
				case dt.ID() == arrow.STRING:
					b.(*array.StringBuilder).Append(fmt.Sprintf("v%d", (i*c)%40))
				default:
					b.(*array.LargeStringBuilder).Append(fmt.Sprintf("v%d", (i*c)%40))
				}
			}
			a := b.NewArray()
			b.Release()
			s := array.NewSlice(a, 10, 290) // offsets that do not start at 0
			a.Release()
			defer s.Release()
			vals = append(vals, s)
			rows += s.Len()
		}
		offs, data, _ := varValues(vals, rows, exactBuf)
		wantIdx, wantDict := dictionaryEncode(dt, pageStringsOfBytes(offs, data))
		gotIdx, gotDict := dictionaryEncode(dt, pageStringsOf(vals))
		if wantDict == nil || gotDict == nil {
			t.Fatalf("%s: no dictionary (gathered %v, in place %v)", dt, wantDict != nil, gotDict != nil)
		}
		if !bytes.Equal(wantIdx, gotIdx) || !bytes.Equal(wantDict.buf, gotDict.buf) || wantDict.n != gotDict.n {
			t.Fatalf("%s: the dictionary built in place differs from the gathered one", dt)
		}
	}
}

// TestPageStringsSampled: a stride sample walks chunks in place (an empty
// one among them, nulls as empty values) as it walks the gathered values.
func TestPageStringsSampled(t *testing.T) {
	var vals []arrow.Array
	rows := 0
	for c := range 4 {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range 97 * (c % 3) { // chunk 0 is empty
			if i%13 == 0 {
				b.AppendNull()
			} else {
				b.Append(fmt.Sprintf("c%d-%d", c, i))
			}
		}
		a := b.NewArray()
		b.Release()
		defer a.Release()
		vals = append(vals, a)
		rows += a.Len()
	}
	offs, data, _ := varValues(vals, rows, exactBuf)
	for _, stride := range []int{1, 3, 50} {
		n := (rows + stride - 1) / stride
		var got, want []string
		for v := range pageStringsOf(vals).sampled(stride, n) {
			got = append(got, string(v))
		}
		for v := range pageStringsOfBytes(offs, data).sampled(stride, n) {
			want = append(want, string(v))
		}
		if len(got) != n || !slices.Equal(got, want) {
			t.Fatalf("stride %d: sampled %d values %q, want %d %q", stride, len(got), got, n, want)
		}
	}
}

// TestDictTableKeys: each distinct value gets one index, in first-seen
// order, as a map gives: values differing only in length or trailing zero
// bytes, only in the middle (same first and last 8 bytes), and enough of
// them to grow the table.
func TestDictTableKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var values [][]byte
	for _, v := range []string{"", "\x00", "\x00\x00", "a", "a\x00", "abcdefgh", "abcdefgh\x00", "abcdefghijklmnop", "abcdefghijklmnopq"} {
		values = append(values, []byte(v))
	}
	for range 3000 {
		n := r.IntN(40)
		v := make([]byte, n)
		for j := range v {
			v[j] = "ab\x00"[r.IntN(3)]
		}
		values = append(values, v)
		if n > 16 { // the same ends, another middle
			w := slices.Clone(v)
			w[n/2] ^= 1
			values = append(values, w)
		}
	}
	d := newDictTable(0)
	model := map[string]uint32{}
	for round := range 2 {
		for i, v := range values {
			want, ok := model[string(v)]
			if !ok {
				want = uint32(len(model))
				model[string(v)] = want
			}
			got, ok := d.index(v, 1<<20)
			if !ok || got != want {
				t.Fatalf("round %d, value %d %q: index %d, %v; want %d", round, i, v, got, ok, want)
			}
		}
	}
	if len(d.offs)-1 != len(model) {
		t.Fatalf("%d values in the dictionary, want %d", len(d.offs)-1, len(model))
	}
}

// BenchmarkDictTableIndex: a page of 190,000 values of 16 distinct ones
// indexed into a dictionary, of 15 and of 40 bytes.
func BenchmarkDictTableIndex(b *testing.B) {
	offs, data := page(190_000, 16)
	long := make([]byte, 0, len(data)*3)
	loffs := []uint64{0}
	for i := range len(offs) - 1 {
		long = fmt.Appendf(long, "%s-%024d", data[offs[i]:offs[i+1]], 7)
		loffs = append(loffs, uint64(len(long)))
	}
	for name, pg := range map[string]struct {
		offs []uint64
		data []byte
	}{"short": {offs, data}, "long": {loffs, long}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				t := newDictTable(16)
				for i := range len(pg.offs) - 1 {
					t.index(pg.data[pg.offs[i]:pg.offs[i+1]], 1000)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(pg.offs)-1)), "ns/value")
		})
	}
}

// BenchmarkEstimateDistinct: the estimate of a 131,072-row page of 16
// categories (the first look ends it), of 1,000 (the stride sample too)
// and of 20,000 names (the first look reads them as mostly distinct).
func BenchmarkEstimateDistinct(b *testing.B) {
	const rows = 131_072
	for _, distinct := range []int{16, 1000, 20_000} {
		offs, data := page(rows, distinct)
		p := pageStringsOfBytes(offs, data)
		b.Run(fmt.Sprint(distinct), func(b *testing.B) {
			for b.Loop() {
				estimateDistinct(p, dictMaxDistinct(rows))
			}
		})
	}
}
