package lanceenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

func zzCheck(t *testing.T, name string, offs []uint64, data []byte) (int, bool) {
	t.Helper()
	cOffs, codes, table, ok := fsstCompress(offs, data)
	if !ok {
		return 0, false
	}
	rows := len(offs) - 1
	if cOffs[0] != 0 || int(cOffs[rows]) != len(codes) {
		t.Fatalf("%s: cOffs ends %d/%d len %d", name, cOffs[0], cOffs[rows], len(codes))
	}
	got, err := fsstDecode(NewBudget(1<<40), table, block{n: rows, data: codes, offs: cOffs})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := range rows {
		want := data[offs[i]:offs[i+1]]
		if g := got.data[got.offs[i]:got.offs[i+1]]; !bytes.Equal(g, want) {
			t.Fatalf("%s: value %d: %x, want %x", name, i, g, want)
		}
		// no trailing lone escape
		c := codes[cOffs[i]:cOffs[i+1]]
		for j := 0; j < len(c); j++ {
			if c[j] == 255 {
				j++
			}
			if j >= len(c) {
				t.Fatalf("%s: value %d ends in escape", name, i)
			}
		}
	}
	return len(codes), true
}

func zzGen(rnd *rand.Rand, shape int, total int, spare int) ([]uint64, []byte) {
	offs := []uint64{0}
	var data []byte
	alpha := []byte("abc\x00\xff")
	words := [][]byte{[]byte("http://"), []byte("\xff\xff\xff\xff\xff\xff\xff\xff"), []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00"), []byte("user-"), []byte("abcdefgh"), []byte("日本")}
	for len(data) < total {
		var v []byte
		switch shape {
		case 0: // small alphabet incl 0xff/0, length 0..7
			n := rnd.IntN(8)
			for range n {
				v = append(v, alpha[rnd.IntN(len(alpha))])
			}
		case 1: // words
			for range rnd.IntN(6) {
				v = append(v, words[rnd.IntN(len(words))]...)
			}
		case 2: // binary with many zeros
			n := rnd.IntN(40)
			for range n {
				if rnd.IntN(3) == 0 {
					v = append(v, byte(rnd.IntN(256)))
				} else {
					v = append(v, 0)
				}
			}
		case 3: // mostly empty, occasional value
			if rnd.IntN(50) == 0 {
				v = append(v, words[rnd.IntN(len(words))]...)
				v = append(v, byte(rnd.IntN(256)))
			}
		case 4: // random bytes
			n := rnd.IntN(20)
			for range n {
				v = append(v, byte(rnd.IntN(256)))
			}
		case 5: // one huge value near 8 KiB among small ones
			if rnd.IntN(200) == 0 {
				n := 8<<10 - rnd.IntN(3)
				for range n {
					v = append(v, alpha[rnd.IntN(len(alpha))])
				}
			} else {
				v = append(v, words[rnd.IntN(len(words))]...)
			}
		case 6: // all 0xff
			v = bytes.Repeat([]byte{0xff}, rnd.IntN(12))
		case 7: // exact 8-byte repetitive symbols, lengths 1..9
			w := words[rnd.IntN(len(words))]
			v = append(v, w[:min(len(w), 1+rnd.IntN(9))]...)
		}
		data = append(data, v...)
		offs = append(offs, uint64(len(data)))
	}
	if spare > 0 {
		d2 := make([]byte, len(data), len(data)+spare)
		copy(d2, data)
		g := d2[len(data):cap(d2)]
		for i := range g {
			g[i] = byte(rnd.IntN(256))
		}
		data = d2
	}
	return offs, data
}

func TestZZRoundTrip(t *testing.T) {
	seeds := 40
	if s := os.Getenv("ZZSEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	sizes := []int{100, 16 << 10, 32<<10 - 1, 32 << 10, 40 << 10, 1<<20 - 10, 1<<20 + 10}
	nok := 0
	for seed := range seeds {
		rnd := rand.New(rand.NewPCG(uint64(seed), 7))
		for shape := range 8 {
			size := sizes[rnd.IntN(len(sizes))]
			if seed%4 != 0 && size > 1<<19 {
				size = 64 << 10
			}
			offs, data := zzGen(rnd, shape, size, rnd.IntN(3)*8)
			if _, ok := zzCheck(t, fmt.Sprintf("seed %d shape %d size %d", seed, shape, size), offs, data); ok {
				nok++
			}
		}
	}
	t.Logf("%d compressed", nok)
}

// Two pages compressed after each other give the same bytes as each alone.
func TestZZPoolDeterminism(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 3))
	type pg struct {
		offs []uint64
		data []byte
	}
	var pages []pg
	for shape := range 8 {
		o, d := zzGen(rnd, shape, 40<<10, 0)
		pages = append(pages, pg{o, d})
	}
	var first [][]byte
	for _, p := range pages {
		_, codes, table, _ := fsstCompress(p.offs, p.data)
		first = append(first, append(codes, table...))
	}
	for r := range 3 {
		for i := len(pages) - 1; i >= 0; i-- {
			_, codes, table, _ := fsstCompress(pages[i].offs, pages[i].data)
			if !bytes.Equal(first[i], append(codes, table...)) {
				t.Fatalf("round %d page %d differs", r, i)
			}
		}
	}
}
