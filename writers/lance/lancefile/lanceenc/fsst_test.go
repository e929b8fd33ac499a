package lanceenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// fsstPage lays values out as a page's offsets and bytes.
func fsstPage(values []string) ([]uint64, []byte) {
	offs := []uint64{0}
	var data []byte
	for _, v := range values {
		data = append(data, v...)
		offs = append(offs, uint64(len(data)))
	}
	return offs, data
}

// fsstRoundTrip compresses values and expands them with the reader's
// decoder (the one that reads pylance's FSST pages), failing on any
// difference; it returns the compressed size (0: left uncompressed).
func fsstRoundTrip(t *testing.T, values []string) int {
	t.Helper()
	return fsstRoundTripWith(t, values, nil)
}

// fsstRoundTripWith is fsstRoundTrip of a page of a column whose FSST
// history is h.
func fsstRoundTripWith(t *testing.T, values []string, h *fsstHistory) int {
	t.Helper()
	offs, data := fsstPage(values)
	cOffs, codes, table, ok := fsstCompress(offs, data, h)
	if !ok {
		return 0
	}
	if len(table) != fsstTableBytes || binary.LittleEndian.Uint64(table)>>32 != 0x46535354 {
		t.Fatalf("table of %d bytes, header %x", len(table), table[:8])
	}
	got, err := fsstDecode(NewBudget(1<<40), table, block{n: len(values), data: codes, offs: cOffs})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		if g := got.data[got.offs[i]:got.offs[i+1]]; !bytes.Equal(g, []byte(v)) {
			t.Fatalf("value %d: %q, want %q", i, g, v)
		}
	}
	return len(codes)
}

func TestFSSTRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	hex := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[rnd.IntN(16)]
		}
		return string(b)
	}
	words := []string{"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "lazy ", "dog ", "Ärger ", "日本 "}
	cases := map[string]func(i int) string{
		"user ids": func(int) string { return "user-" + hex(10) },
		"text": func(int) string {
			s := ""
			for range 1 + rnd.IntN(12) {
				s += words[rnd.IntN(len(words))]
			}
			return s
		},
		"with empty": func(i int) string {
			if i%3 == 0 {
				return ""
			}
			return fmt.Sprintf("https://example.com/item/%d?ref=%s", i, hex(4))
		},
		"escapes": func(i int) string { return string([]byte{255, 0, byte(i), 255, 'a', 'b', 'c', 255}) + hex(3) },
		"one long": func(i int) string {
			if i == 7 {
				return hex(maxMiniValue)
			}
			return "x" + hex(6)
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			values := make([]string, 5000)
			if name == "user ids" { // past fsstSplitBytes: two halves joined
				values = make([]string, 100_000)
			}
			raw := 0
			for i := range values {
				values[i] = gen(i)
				raw += len(values[i])
			}
			got := fsstRoundTrip(t, values)
			if got == 0 {
				t.Fatalf("%d bytes of %s left uncompressed", raw, name)
			}
			t.Logf("%s: %d -> %d bytes (%.2f)", name, raw, got, float64(got)/float64(raw))
		})
	}
}

// TestFSSTReusesTableOfLikePages: a column's pages reuse the table built
// for an earlier page while their values are alike, up to fsstMaxReuses
// pages in a row, and build their own when the values change or the last
// page did not shrink (random bytes, then text); every page reads back,
// and a reused table compresses within 4% of a fresh one.
func TestFSSTReusesTableOfLikePages(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	users := func() []string {
		out := make([]string, 20_000)
		for i := range out {
			out[i] = fmt.Sprintf("user-%010x", rnd.Uint64()>>24)
		}
		return out
	}
	urls := func() []string {
		out := make([]string, 20_000)
		for i := range out {
			out[i] = fmt.Sprintf("https://example.com/items/%d/view?ref=mail", rnd.IntN(1e6))
		}
		return out
	}
	random := func() []string {
		out := make([]string, 4000)
		for i := range out {
			b := make([]byte, 16)
			for j := range b {
				b[j] = byte(rnd.Uint32())
			}
			out[i] = string(b)
		}
		return out
	}
	h := new(fsstHistory)
	for i, c := range []struct {
		values func() []string
		built  bool
	}{
		{users, true}, {users, false}, {users, false}, {users, false}, // fsstMaxReuses reuses
		{users, true}, {users, false}, {urls, true}, {urls, false}, {users, true},
		{random, true}, {urls, true},
	} {
		values := c.values()
		size := fsstRoundTripWith(t, values, h)
		if built := h.reuses == 0; built != c.built {
			t.Errorf("page %d: table built %v, want %v", i, built, c.built)
		}
		fresh := fsstRoundTrip(t, values)
		if fresh == 0 { // random bytes: stored as they are either way
			if size != 0 {
				t.Errorf("page %d: random bytes compressed to %d bytes", i, size)
			}
			continue
		}
		if size == 0 || float64(size) > 1.04*float64(fresh) {
			t.Errorf("page %d: %d bytes with the column's table, %d with its own", i, size, fresh)
		}
	}
}

// Values FSST cannot shrink (uniformly random bytes) stay as they are.
func TestFSSTRandomBytesStayRaw(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	values := make([]string, 3000)
	for i := range values {
		b := make([]byte, 20)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		values[i] = string(b)
	}
	if got := fsstRoundTrip(t, values); got != 0 {
		t.Fatalf("random bytes compressed to %d bytes", got)
	}
}

// Text compresses: names, paths and identifiers shrink by a third or more.
func TestFSSTCompresses(t *testing.T) {
	values := make([]string, 20000)
	for i := range values {
		values[i] = fmt.Sprintf("/var/log/service-%d/requests-%04d.json", i%37, i)
	}
	raw := len(values) * len(values[0])
	if got := fsstRoundTrip(t, values); got == 0 || got > raw*2/3 {
		t.Fatalf("%d bytes compressed to %d", raw, got)
	}
}

// The same page builds the same table: files are reproducible.
func TestFSSTDeterministic(t *testing.T) {
	values := make([]string, 4000)
	for i := range values {
		values[i] = fmt.Sprintf("customer-%d-%d", i*7919%1000, i%13)
	}
	offs, data := fsstPage(values)
	_, a, ta, _ := fsstCompress(offs, data, nil)
	_, b, tb, _ := fsstCompress(offs, data, nil)
	if !bytes.Equal(a, b) || !bytes.Equal(ta, tb) {
		t.Fatal("two compressions of one page differ")
	}
}

// BenchmarkFSST: a page of 190,000 user names (the append benchmark's
// medium-cardinality column) compressed, table built included.
func BenchmarkFSST(b *testing.B) {
	offs, data := page(190_000, 20_000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, _, ok := fsstCompress(offs, data, nil); !ok {
			b.Fatal("not compressed")
		}
	}
}

// BenchmarkFSSTTable: the symbol table of a page built from its sample,
// for the append benchmark's user names and the merge benchmark's random
// names (whose tens of thousands of symbol pairs make the candidates).
func BenchmarkFSSTTable(b *testing.B) {
	uoffs, udata := page(190_000, 20_000)
	roffs, rdata := fsstPage(randomNames(200_000))
	for name, sample := range map[string][][]byte{"users": fsstSample(uoffs, udata), "random": fsstSample(roffs, rdata)} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				t, _ := buildFSST(sample)
				fsstTables.Put(t)
			}
		})
	}
}

// randomNames returns n names of 8 to 24 random letters and digits (the
// merge benchmark's), which compress little.
func randomNames(n int) []string {
	r := rand.New(rand.NewPCG(5, 6))
	values := make([]string, n)
	for i := range values {
		v := make([]byte, 8+r.IntN(17))
		for j := range v {
			v[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
		}
		values[i] = string(v)
	}
	return values
}

// BenchmarkFSSTRandomNames: a page of 200,000 random names compressed,
// table built included.
func BenchmarkFSSTRandomNames(b *testing.B) {
	offs, data := fsstPage(randomNames(200_000))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		fsstCompress(offs, data, nil)
	}
}

// A page of 1 MiB or more (compressed in two halves) whose second half
// FSST cannot shrink still compresses as a whole, as one pass would.
func TestFSSTSplitHalvesJudgedTogether(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	values := make([]string, 2000)
	for i := range values {
		if i < 1000 {
			values[i] = strings.Repeat("lorem ipsum ", 84)[:1000]
			continue
		}
		b := make([]byte, 100)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		values[i] = string(b)
	}
	_, data := fsstPage(values)
	if len(data) < fsstSplitBytes {
		t.Fatalf("page of %d bytes is not split", len(data))
	}
	if got := fsstRoundTrip(t, values); got == 0 || got > len(data)/2 {
		t.Fatalf("%d bytes compressed to %d", len(data), got)
	}
}

// Values FSST would widen past what a mini-block value may be (two
// adjacent 8 KiB values of bytes it escapes) leave the page plain, not
// full-zipped, and the page stays in mini-blocks.
func TestFSSTWideningStaysMiniBlock(t *testing.T) {
	rnd := rand.New(rand.NewPCG(12, 12))
	b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer b.Release()
	words := []string{"lorem ", "ipsum ", "dolor ", "sit ", "amet "}
	for i := range 4000 {
		if i == 2000 || i == 2001 {
			v := make([]byte, maxMiniValue)
			for j := range v {
				v[j] = byte(128 + rnd.IntN(127))
			}
			b.Append(v)
			continue
		}
		var s strings.Builder
		for range 10 {
			s.WriteString(words[rnd.IntN(len(words))])
		}
		b.Append([]byte(s.String()))
	}
	a := b.NewArray()
	defer a.Release()
	pv, err := newChunker(a.DataType(), []arrow.Array{a}, a.Len(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv.zip != nil || pv.enc.GetFsst() != nil || pv.enc.GetVariable() == nil {
		t.Fatalf("page encoded as %v (zipped %v), want plain variable mini-blocks", pv.enc, pv.zip != nil)
	}
}

// A 2.2 dictionary is LZ4-compressed as pylance stores it, also when LZ4
// cannot shrink it, and reads back.
func TestLZ4Dictionary(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	for _, buf := range [][]byte{random, []byte(strings.Repeat("category-1category-2", 200))} {
		d := (&pageDict{n: 1, buf: buf, enc: variableEncoding(32)}).lz4()
		g := d.enc.GetGeneral()
		if g == nil || g.GetCompression().GetScheme() != encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4 {
			t.Fatalf("dictionary of %d bytes stored as %v", len(buf), d.enc)
		}
		got, err := decompress(NewBudget(1<<30), g.GetCompression().GetScheme(), d.buf)
		if err != nil || !bytes.Equal(got, buf) {
			t.Fatalf("dictionary of %d bytes read back as %d bytes: %v", len(buf), len(got), err)
		}
	}
}

// compressRows, which compresses two runs of values in step, writes the
// codes and offsets one value at a time would: over pages of 0 to 9
// values and of random lengths (empty values, one-byte values, values
// ending at the page's last byte, escapes), with the page's capacity ending
// at its bytes.
func TestFSSTRowsInStep(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 300 {
		n := trial % 10
		if trial >= 100 {
			n = r.IntN(300)
		}
		values := make([]string, n)
		for i := range values {
			v := make([]byte, r.IntN(30))
			for j := range v {
				v[j] = "aab cde\x00\xffz"[r.IntN(10)]
			}
			values[i] = string(v)
		}
		offs, data := fsstPage(values)
		data = data[:len(data):len(data)]
		tb, _ := buildFSST(fsstSample(offs, data))
		tb.fill()
		want := make([]byte, 2*len(data)+64)
		wantOffs := make([]uint64, len(offs))
		o := 0
		for i := range n {
			o = tb.compress(want, data, o, int(offs[i]), int(offs[i+1]))
			wantOffs[i+1] = uint64(o)
		}
		gotOffs := make([]uint64, len(offs))
		got, _, ok := tb.compressRows(gotOffs, offs, data, 0, n, 1<<30)
		if !ok || !bytes.Equal(got, want[:o]) || !slices.Equal(gotOffs, wantOffs) {
			t.Fatalf("trial %d (%d values): in step %x %v, one by one %x %v", trial, n, got, gotOffs, want[:o], wantOffs)
		}
		// The second half of a page on its own (fsstCompress's split),
		// its offsets relative to its first value's codes.
		mid := n / 2
		half, _, ok := tb.compressRows(gotOffs, offs, data, mid, n, 1<<30)
		for i := mid; i < n && ok; i++ {
			ok = gotOffs[i+1] == wantOffs[i+1]-wantOffs[mid]
		}
		if !ok || !bytes.Equal(half, want[wantOffs[mid]:o]) {
			t.Fatalf("trial %d: rows %d..%d in step %x, one by one %x", trial, mid, n, half, want[wantOffs[mid]:o])
		}
		// Codes reaching the limit (the page's bytes) fail it.
		if _, _, ok := tb.compressRows(gotOffs, offs, data, 0, n, o); o > 0 && ok {
			t.Fatalf("trial %d: %d bytes of codes passed a limit of %d", trial, o, o)
		}
	}
}

// BenchmarkFSSTRows: the compression loop alone, on one goroutine (the
// table built off the clock), over the merge benchmark's random names and
// the append benchmark's user names.
func BenchmarkFSSTRows(b *testing.B) {
	roffs, rdata := fsstPage(randomNames(200_000))
	uoffs, udata := page(190_000, 20_000)
	for name, pg := range map[string]struct {
		offs []uint64
		data []byte
	}{"random": {roffs, rdata}, "users": {uoffs, udata}} {
		b.Run(name, func(b *testing.B) {
			t, _ := buildFSST(fsstSample(pg.offs, pg.data))
			t.fill()
			cOffs := make([]uint64, len(pg.offs))
			b.SetBytes(int64(len(pg.data)))
			for b.Loop() {
				t.compressRows(cOffs, pg.offs, pg.data, 0, len(pg.offs)-1, len(pg.data))
			}
		})
	}
}
