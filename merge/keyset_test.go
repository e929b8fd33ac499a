package merge

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestKeySetGrowsAndFinds(t *testing.T) {
	s := NewKeySet(0)
	const n = 10000
	buf := make([]byte, 8)
	for i := range n {
		binary.BigEndian.PutUint64(buf, uint64(i*7919))
		ord, added := s.Add(buf)
		if !added || ord != i {
			t.Fatalf("Add(%d) = %d, %v; want %d, true", i, ord, added, i)
		}
	}
	// buf was reused: the set must have copied every key.
	for i := range n {
		binary.BigEndian.PutUint64(buf, uint64(i*7919))
		if ord, added := s.Add(buf); added || ord != i {
			t.Fatalf("re-Add(%d) = %d, %v; want %d, false", i, ord, added, i)
		}
		if ord, ok := s.Find(buf); !ok || ord != i {
			t.Fatalf("Find(%d) = %d, %v", i, ord, ok)
		}
		if got := binary.BigEndian.Uint64(s.Key(i)); got != uint64(i*7919) {
			t.Fatalf("Key(%d) = %d", i, got)
		}
	}
	binary.BigEndian.PutUint64(buf, 1)
	if _, ok := s.Find(buf); ok {
		t.Error("Find of an absent key succeeded")
	}
	if _, ok := s.Find(nil); ok {
		t.Error("Find of the empty key succeeded")
	}
	if s.Len() != n {
		t.Errorf("Len = %d, want %d", s.Len(), n)
	}
	if perKey := float64(s.MemoryBytes()) / n; perKey > 48 {
		t.Errorf("%.1f bytes per 8-byte key, want at most 48", perKey)
	}
}

func TestKeySetEmptyAndPrefixKeys(t *testing.T) {
	s := NewKeySet(4)
	keys := [][]byte{{}, {0}, {0, 0}, {1}, {0, 1}}
	for i, k := range keys {
		if ord, added := s.Add(k); !added || ord != i {
			t.Fatalf("Add(%x) = %d, %v", k, ord, added)
		}
	}
	for i, k := range keys {
		if ord, ok := s.Find(k); !ok || ord != i {
			t.Errorf("Find(%x) = %d, %v; want %d", k, ord, ok, i)
		}
	}
}

func TestKeyIndex(t *testing.T) {
	x := NewKeyIndex(2)
	if _, replaced := x.Put([]byte("a"), 10); replaced {
		t.Error("first Put replaced")
	}
	x.Put([]byte("b"), 20)
	if old, replaced := x.Put([]byte("a"), 11); !replaced || old != 10 {
		t.Errorf("Put over a = %d, %v; want 10, true", old, replaced)
	}
	for k, want := range map[string]uint64{"a": 11, "b": 20} {
		if v, ok := x.Get([]byte(k)); !ok || v != want {
			t.Errorf("Get(%s) = %d, %v; want %d", k, v, ok, want)
		}
	}
	if _, ok := x.Get([]byte("c")); ok {
		t.Error("Get of an absent key succeeded")
	}
	if x.Len() != 2 || string(x.Keys().Key(1)) != "b" || x.Value(1) != 20 {
		t.Errorf("Len %d, ordinal 1 = %q:%d", x.Len(), x.Keys().Key(1), x.Value(1))
	}
	if x.MemoryBytes() <= 0 {
		t.Error("MemoryBytes is not positive")
	}
}

func TestKeyMatcherMatchRows(t *testing.T) {
	mem := checkedMem(t)
	src := keyRecord(t, mem, []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String}, []int64{3, 5, 8})
	defer src.Release()
	target := keyRecord(t, mem, []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String}, []int64{1, 3, 4, 5, 5, 9, 8})
	defer target.Release()
	enc, err := NewKeyEncoder(src.Schema(), []string{"c0", "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(src); err != nil {
		t.Fatal(err)
	}
	s := NewKeySet(enc.Len())
	for i := range enc.Len() {
		s.Add(enc.Key(i))
	}
	if err := enc.Encode(target); err != nil {
		t.Fatal(err)
	}
	got, ords := NewKeyMatcher(s).MatchRows(enc, nil, nil)
	if want := []int32{1, 3, 4, 6}; !slices.Equal(got, want) {
		t.Errorf("MatchRows = %v, want %v", got, want)
	}
	// The source keys 3, 5, 8 have ordinals 0, 1, 2.
	if want := []int32{0, 1, 1, 2}; !slices.Equal(ords, want) {
		t.Errorf("MatchRows ordinals = %v, want %v", ords, want)
	}
}

func BenchmarkKeySetAdd(b *testing.B) {
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := NewKeySet(len(keys))
		for _, k := range keys {
			s.Add(k)
		}
	}
	b.ReportMetric(float64(len(keys)*b.N)/b.Elapsed().Seconds(), "keys/s")
}
