package dv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
	"github.com/quiver-ingest/quiver/internal/deltagolden"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

// span returns lo, lo+step, ... below hi.
func span(lo, hi, step int64) []int64 {
	var out []int64
	for v := lo; v < hi; v += step {
		out = append(out, v)
	}
	return out
}

func bitmapRows(bm *roaring64.Bitmap) []int64 {
	var out []int64
	for it := bm.Iterator(); it.HasNext(); {
		out = append(out, int64(it.Next()))
	}
	return out
}

// goldenDVFiles returns every deletion-vector file of the golden tables.
func goldenDVFiles(tb testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(deltagolden.Dir(), "*", "deletion_vector_*.bin"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden deletion-vector files under %s (make golden writes them): %v", deltagolden.Dir(), err)
	}
	return files
}

// dvEntries splits a deletion-vector file into its serialized bitmaps
// (version byte, then size, bitmap and CRC per entry).
func dvEntries(data []byte) ([][]byte, error) {
	if len(data) == 0 || data[0] != dvFormatVersion {
		return nil, errors.New("no version byte")
	}
	var out [][]byte
	for off := 1; off < len(data); {
		if len(data)-off < 8 {
			return nil, errors.New("truncated entry")
		}
		size := int(binary.BigEndian.Uint32(data[off:]))
		if size > len(data)-off-8 {
			return nil, errors.New("entry overruns the file")
		}
		out = append(out, data[off+4:off+4+size])
		off += 4 + size + 4
	}
	return out, nil
}

// TestGoldenDeletionVectorBytes: rebuilding every Spark-written golden file
// from its rows with DeletionVectorFile gives the same file byte for byte
// (portable layout, no run containers, CRC of magic + bitmap), entry after
// entry at the offsets the writer chose.
func TestGoldenDeletionVectorBytes(t *testing.T) {
	entries := 0
	for _, path := range goldenDVFiles(t) {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			bitmaps, err := dvEntries(data)
			if err != nil || len(bitmaps) == 0 {
				t.Fatalf("%d entries: %v", len(bitmaps), err)
			}
			f := NewDeletionVectorFile()
			for _, raw := range bitmaps {
				bm, err := decodeBitmap(raw)
				if err != nil {
					t.Fatal(err)
				}
				offset := len(f.Bytes())
				d, err := f.Add(bitmapRows(bm))
				if err != nil {
					t.Fatal(err)
				}
				if int(*d.Offset) != offset || int(d.SizeInBytes) != len(raw) || d.Cardinality != int64(bm.GetCardinality()) {
					t.Fatalf("descriptor %+v, want offset %d size %d", d, offset, len(raw))
				}
				entries++
			}
			if !bytes.Equal(f.Bytes(), data) {
				t.Fatalf("rebuilt file\n%x\nwant\n%x", f.Bytes(), data)
			}
		})
	}
	t.Logf("%d deletion vectors rebuilt byte for byte", entries)
}

// TestReadDeletionVectorGolden applies the deletion vectors of the live
// files to their Parquet rows and checks what the README states.
func TestReadDeletionVectorGolden(t *testing.T) {
	for _, tc := range []struct {
		table  string
		column string  // integer column collected from the surviving rows
		rows   int     // rows left once deletion vectors are applied
		want   []int64 // the surviving values, sorted
	}{
		{"dv-small", "value", 8, span(1, 9, 1)},
		// Generator: col1 = x for x < 50, minus col1 ∈ {0, 2, …, 28}.
		{"dv-partitioned-checkpoint", "col1", 35, MergeRows(span(1, 29, 2), span(29, 50, 1))},
		{"dv-same-file", "id", 47, slices.DeleteFunc(span(0, 50, 1), func(v int64) bool { return v > 0 && v < 40 && v%10 == 0 })},
		{"dv-large", "id", 35000, span(1, 70000, 2)},
	} {
		t.Run(tc.table, func(t *testing.T) {
			ctx := t.Context()
			b := deltagolden.Open(t, tc.table)
			s, err := deltalog.Load(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			var kept []int64
			withDV := 0
			for _, a := range s.Files() {
				deleted, err := ReadDeletionVector(ctx, b, a.DeletionVector)
				if err != nil {
					t.Fatal(err)
				}
				if a.DeletionVector != nil {
					withDV++
					if int64(len(deleted)) != a.DeletionVector.Cardinality || !slices.IsSorted(deleted) {
						t.Fatalf("%s: rows %v, cardinality %d", a.Path, deleted, a.DeletionVector.Cardinality)
					}
				}
				if tc.table == "dv-small" && !slices.Equal(deleted, []int64{0, 9}) {
					t.Fatalf("deleted rows %v, want [0 9] (the DELETE of values 0 and 9)", deleted)
				}
				kept = append(kept, survivingValues(t, b, a.Path, tc.column, deleted)...)
			}
			if withDV == 0 {
				t.Fatal("no live file carries a deletion vector")
			}
			if len(kept) != tc.rows {
				t.Fatalf("%d rows survive, want %d", len(kept), tc.rows)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tc.want) {
				t.Fatalf("surviving %s = %v, want %v", tc.column, kept, tc.want)
			}
		})
	}
}

func TestDeletionVectorFileRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		rows []int64
	}{
		{"one row", []int64{0}},
		{"container edges", []int64{3, 17, 65535, 65536, 1 << 20}},
		// 1M rows in bitmap containers: pushes later entries past the
		// combined-read window, so they are read in two requests.
		{"every third of 3M", span(0, 3_000_000, 3)},
		{"dense range", span(5, 200_005, 1)},
		{"beyond 2^32", []int64{1, 1 << 32, 1<<32 + 5, 1 << 40}},
	}
	for _, scheme := range []string{"mem", "file"} {
		t.Run(scheme, func(t *testing.T) {
			store := openStore(t, scheme)
			ctx := t.Context()
			f := NewDeletionVectorFile()
			var ds []*deltalog.DeletionVector
			for _, c := range cases {
				d, err := f.Add(c.rows)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if key, ok, err := DeletionVectorKey(d); err != nil || !ok || key != f.Key() {
					t.Fatalf("%s: key %q, %v, %v; file key %q", c.name, key, ok, err, f.Key())
				}
				if d.StorageType != "u" || len(d.PathOrInlineDv) != dvUUIDChars || d.Cardinality != int64(len(c.rows)) || d.MaxRowIndex != nil {
					t.Fatalf("%s: descriptor %+v", c.name, d)
				}
				ds = append(ds, d)
			}
			if *ds[0].Offset != 1 || *ds[len(ds)-1].Offset <= dvCombinedRead || f.Len() != len(cases) {
				t.Fatalf("offsets %d..%d, %d entries", *ds[0].Offset, *ds[len(ds)-1].Offset, f.Len())
			}
			last := ds[len(ds)-1]
			if end := int(*last.Offset) + 4 + int(last.SizeInBytes) + 4; end != len(f.Bytes()) {
				t.Fatalf("last entry ends at %d, file is %d bytes", end, len(f.Bytes()))
			}
			if !strings.HasPrefix(f.Key(), "deletion_vector_") || !strings.HasSuffix(f.Key(), ".bin") || strings.Contains(f.Key(), "/") {
				t.Fatalf("key %q", f.Key())
			}
			if err := store.Put(ctx, f.Key(), f.Bytes()); err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				got, err := ReadDeletionVector(ctx, store, ds[i])
				if err != nil || !slices.Equal(got, c.rows) {
					t.Fatalf("%s: read %d rows, %v; want %d", c.name, len(got), err, len(c.rows))
				}
			}
		})
	}
}

func TestDeletionVectorFileNamesDiffer(t *testing.T) {
	a, b := NewDeletionVectorFile(), NewDeletionVectorFile()
	if a.Key() == b.Key() {
		t.Fatalf("two files share key %q", a.Key())
	}
}

func TestDeletionVectorFileAddRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []int64
	}{
		{"empty", nil},
		{"negative", []int64{-1, 4}},
		{"descending", []int64{5, 3}},
		{"duplicate", []int64{2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewDeletionVectorFile()
			d, err := f.Add(tc.rows)
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), f.Key()) || d != nil {
				t.Fatalf("Add = %+v, %v; want an ErrInvalid naming the file", d, err)
			}
			if f.Len() != 0 || !bytes.Equal(f.Bytes(), []byte{dvFormatVersion}) {
				t.Fatalf("a refused deltalog.Add changed the file: %d entries, %x", f.Len(), f.Bytes())
			}
		})
	}
}

// TestReadDeletionVectorCorrupt damages a two-entry file in one way at a
// time; every read must fail with an ErrCorrupt naming the file.
func TestReadDeletionVectorCorrupt(t *testing.T) {
	f := NewDeletionVectorFile()
	if _, err := f.Add([]int64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	good, err := f.Add([]int64{7, 70_000})
	if err != nil {
		t.Fatal(err)
	}
	off, size := int(*good.Offset), int(good.SizeInBytes)
	bitmap := off + 4 // first bitmap byte (the magic)
	reCRC := func(b []byte, n int) {
		binary.BigEndian.PutUint32(b[bitmap+n:], crc32.ChecksumIEEE(b[bitmap:bitmap+n]))
	}
	for _, tc := range []struct {
		name   string
		damage func(b []byte, d *deltalog.DeletionVector) []byte
		want   string
	}{
		{"crc", func(b []byte, _ *deltalog.DeletionVector) []byte { b[bitmap+size] ^= 1; return b }, "CRC-32"},
		{"bitmap bit flip", func(b []byte, _ *deltalog.DeletionVector) []byte { b[len(b)-5] ^= 0x10; return b }, "CRC-32"},
		{"magic", func(b []byte, _ *deltalog.DeletionVector) []byte { b[bitmap] ^= 1; reCRC(b, size); return b }, "magic number"},
		{"native magic", func(b []byte, _ *deltalog.DeletionVector) []byte {
			binary.LittleEndian.PutUint32(b[bitmap:], dvMagic-1)
			reCRC(b, size)
			return b
		}, "magic number 1681511376"},
		{"size field", func(b []byte, _ *deltalog.DeletionVector) []byte { b[off+3]--; return b }, "size field"},
		{"log size", func(b []byte, d *deltalog.DeletionVector) []byte { d.SizeInBytes -= 2; return b }, "size field"},
		{"version", func(b []byte, _ *deltalog.DeletionVector) []byte { b[0] = 2; return b }, "format version 2"},
		{"cardinality", func(b []byte, d *deltalog.DeletionVector) []byte { d.Cardinality++; return b }, "cardinality 3"},
		{"truncated", func(b []byte, _ *deltalog.DeletionVector) []byte { return b[:len(b)-1] }, "runs past the end"},
		{"offset", func(b []byte, d *deltalog.DeletionVector) []byte { *d.Offset = 0; return b }, "offset 0"},
		{"bucket count", func(b []byte, _ *deltalog.DeletionVector) []byte {
			binary.LittleEndian.PutUint64(b[bitmap+4:], 1<<40)
			reCRC(b, size)
			return b
		}, "buckets cannot fit"},
		{"trailing bytes", func(b []byte, d *deltalog.DeletionVector) []byte {
			b = append(b[:bitmap+size], 0, 0, 0, 0, 0, 0)
			binary.BigEndian.PutUint32(b[off:], uint32(size+2))
			d.SizeInBytes += 2
			reCRC(b, size+2)
			return b
		}, "2 bytes after the roaring bitmap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openMem(t)
			d := *good
			o := *good.Offset
			d.Offset = &o
			data := tc.damage(slices.Clone(f.Bytes()), &d)
			if err := store.Put(t.Context(), f.Key(), data); err != nil {
				t.Fatal(err)
			}
			rows, err := ReadDeletionVector(t.Context(), store, &d)
			if !errors.Is(err, deltalog.ErrCorrupt) || !strings.Contains(err.Error(), f.Key()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read = %v, %v; want an deltalog.ErrCorrupt naming %s and saying %q", rows, err, f.Key(), tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := ReadDeletionVector(t.Context(), openMem(t), good)
		if !errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), f.Key()) {
			t.Fatalf("read = %v, want ErrNotExist naming %s", err, f.Key())
		}
	})
}

func TestReadDeletionVectorDescriptors(t *testing.T) {
	store := openMem(t)
	if rows, err := ReadDeletionVector(t.Context(), store, nil); rows != nil || err != nil {
		t.Fatalf("nil descriptor = %v, %v", rows, err)
	}
	for _, tc := range []struct {
		name  string
		d     deltalog.DeletionVector
		class error
		want  string
	}{
		{"absolute", deltalog.DeletionVector{StorageType: "p", PathOrInlineDv: "s3://b/t/dv.bin", SizeInBytes: 34, Cardinality: 1}, deltalog.ErrUnsupported, "s3://b/t/dv.bin"},
		{"unknown type", deltalog.DeletionVector{StorageType: "x", PathOrInlineDv: "vBn[lx{q8@P<9BNH/isA"}, deltalog.ErrCorrupt, `storageType "x"`},
		{"short relative", deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "vBn[lx"}, deltalog.ErrCorrupt, "vBn[lx"},
		{"bad Z85 uuid", deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "vBn[lx{q8@P<9BNH/is "}, deltalog.ErrCorrupt, "Z85"},
		{"bad inline", deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "abc", SizeInBytes: 2}, deltalog.ErrCorrupt, "inline abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := ReadDeletionVector(t.Context(), store, &tc.d)
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read = %v, %v; want %v naming %q", rows, err, tc.class, tc.want)
			}
		})
	}
}

// TestReadInlineDeletionVector: Delta zero-pads inline bitmaps to a
// multiple of 4 before Z85; sizeInBytes is the unpadded length.
func TestReadInlineDeletionVector(t *testing.T) {
	bm := roaring64.BitmapOf(2, 5, 7)
	bitmap, err := encodeBitmap(bm)
	if err != nil {
		t.Fatal(err)
	}
	if len(bitmap)%4 == 0 {
		t.Fatalf("%d bytes needs no padding: the test would not cover it", len(bitmap))
	}
	padded := append(slices.Clone(bitmap), make([]byte, 4-len(bitmap)%4)...)
	enc, err := z85Encode(padded)
	if err != nil {
		t.Fatal(err)
	}
	d := &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: enc, SizeInBytes: int32(len(bitmap)), Cardinality: 3}
	rows, err := ReadDeletionVector(t.Context(), openMem(t), d)
	if err != nil || !slices.Equal(rows, []int64{2, 5, 7}) {
		t.Fatalf("read = %v, %v", rows, err)
	}
	if key, ok, err := DeletionVectorKey(d); key != "" || ok || err != nil {
		t.Fatalf("DeletionVectorKey(inline) = %q, %v, %v", key, ok, err)
	}
	d.SizeInBytes = int32(len(padded)) + 4
	if _, err := ReadDeletionVector(t.Context(), openMem(t), d); !errors.Is(err, deltalog.ErrCorrupt) || !strings.Contains(err.Error(), "sizeInBytes") {
		t.Fatalf("oversized inline read = %v, want deltalog.ErrCorrupt about sizeInBytes", err)
	}
}

func TestDeletionVectorKey(t *testing.T) {
	const id, name = "vBn[lx{q8@P<9BNH/isA", "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
	for _, tc := range []struct {
		name    string
		d       *deltalog.DeletionVector
		key     string
		ok      bool
		corrupt bool
	}{
		{"nil", nil, "", false, false},
		{"relative", &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: id}, name, true, false},
		{"random prefix", &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "ab" + id}, "ab/" + name, true, false},
		{"inline", &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "HelloWorld"}, "", false, false},
		{"absolute", &deltalog.DeletionVector{StorageType: "p", PathOrInlineDv: "file:/tmp/x.bin"}, "", false, false},
		{"prefix escapes", &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "../" + id}, "", false, true},
		{"dot-dot prefix", &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: ".." + id}, "", false, true},
		{"unknown type", &deltalog.DeletionVector{StorageType: "q", PathOrInlineDv: id}, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, ok, err := DeletionVectorKey(tc.d)
			if key != tc.key || ok != tc.ok || errors.Is(err, deltalog.ErrCorrupt) != tc.corrupt || (err != nil) != tc.corrupt {
				t.Fatalf("= %q, %v, %v; want %q, %v, corrupt %v", key, ok, err, tc.key, tc.ok, tc.corrupt)
			}
		})
	}
}

func TestMergeRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    []int64
		want    []int64
		wantLen int
	}{
		{"both empty", nil, nil, []int64{}, 0},
		{"one empty", nil, []int64{4, 9}, []int64{4, 9}, 2},
		{"interleaved", []int64{1, 5, 9}, []int64{2, 6}, []int64{1, 2, 5, 6, 9}, 5},
		{"overlap", []int64{0, 3, 7}, []int64{3, 7, 8}, []int64{0, 3, 7, 8}, 4},
		{"b first", []int64{100}, []int64{1, 2}, []int64{1, 2, 100}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := slices.Clone(tc.a), slices.Clone(tc.b)
			got := MergeRows(a, b)
			if !slices.Equal(got, tc.want) || len(got) != tc.wantLen {
				t.Fatalf("MergeRows(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if !slices.Equal(a, tc.a) || !slices.Equal(b, tc.b) {
				t.Fatalf("inputs modified: %v %v", a, b)
			}
		})
	}
}

// hostileBitmaps are a valid bitmap cut short, one whose bucket count is
// 2^64-1, one whose single bucket declares 2^16 containers of 2^16 rows
// each without their bytes, and a valid one of 2^32 rows in under 1 MiB
// (run containers) that must not be materialised.
func hostileBitmaps(t testing.TB) map[string][]byte {
	valid, err := encodeBitmap(roaring64.BitmapOf(1, 1<<32, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	buckets := bytes.Clone(valid)
	binary.LittleEndian.PutUint64(buckets[4:], math.MaxUint64)
	head := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, dvMagic), 1)
	head = binary.LittleEndian.AppendUint32(head, 0) // bucket key
	cards := binary.LittleEndian.AppendUint32(bytes.Clone(head), 12346)
	cards = binary.LittleEndian.AppendUint32(cards, 1<<16)
	for i := range 1 << 16 {
		cards = binary.LittleEndian.AppendUint32(cards, uint32(i)|0xFFFF<<16)
	}
	runs := binary.LittleEndian.AppendUint32(bytes.Clone(head), 12347|0xFFFF<<16)
	runs = append(runs, bytes.Repeat([]byte{0xFF}, 8192)...)
	for i := range 1 << 16 {
		runs = binary.LittleEndian.AppendUint32(runs, uint32(i)|0xFFFF<<16)
	}
	runs = append(runs, make([]byte, 4<<16)...)
	for range 1 << 16 {
		runs = append(runs, 1, 0, 0, 0, 0xFF, 0xFF)
	}
	return map[string][]byte{"truncated": valid[:len(valid)-3], "buckets": buckets, "cardinalities": cards, "runs": runs}
}

// FuzzDecodeBitmap: the decoder never panics, what it accepts encodes to
// a bitmap that decodes to the same set, and materialising it stays
// within maxDeletionVectorRows.
func FuzzDecodeBitmap(f *testing.F) {
	for _, path := range goldenDVFiles(f) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		bitmaps, err := dvEntries(data)
		if err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		for _, b := range bitmaps {
			f.Add(b)
		}
	}
	for _, rows := range [][]uint64{{0}, {1, 1 << 32, 1 << 40}, {65535, 65536}} {
		b, err := encodeBitmap(roaring64.BitmapOf(rows...))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range hostileBitmaps(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bm, err := decodeBitmap(data)
		if err != nil {
			return
		}
		if rows, err := deletedRows(bm, int64(bm.GetCardinality())); err == nil && len(rows) > maxDeletionVectorRows {
			t.Fatalf("%d rows materialised", len(rows))
		}
		enc, err := encodeBitmap(bm)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := decodeBitmap(enc)
		if err != nil || !again.Equals(bm) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestDeletionVectorAllocationBounded: hostile inline deletion vectors,
// each claiming the cardinality its header or runs imply, fail without
// allocating for it.
func TestDeletionVectorAllocationBounded(t *testing.T) {
	for name, b := range hostileBitmaps(t) {
		padded := append(bytes.Clone(b), make([]byte, (4-len(b)%4)%4)...)
		enc, err := z85Encode(padded)
		if err != nil {
			t.Fatal(err)
		}
		d := &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: enc, SizeInBytes: int32(len(b)), Cardinality: 1 << 32}
		alloccheck.Below(t, name, func() { _, err = ReadDeletionVector(t.Context(), nil, d) })
		if !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", name, err)
		}
	}
}

// survivingValues reads the integer column of the data file at path (an
// add path) and returns its values at the positions not in deleted, which
// must all lie inside the file.
func survivingValues(t *testing.T, store deltalog.Store, path, column string, deleted []int64) []int64 {
	t.Helper()
	ctx := t.Context()
	key, err := deltalog.DecodePath(path)
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := store.OpenReader(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rr, err := parquetio.ReadFile(ctx, r, size, mem, parquetio.ReadOptions{Columns: []string{column}})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var kept []int64
	pos := int64(0)
	for rr.Next() {
		col := rr.RecordBatch().Column(0)
		for i := range col.Len() {
			if len(deleted) > 0 && deleted[0] == pos {
				deleted = deleted[1:]
			} else {
				switch c := col.(type) {
				case *array.Int32:
					kept = append(kept, int64(c.Value(i)))
				case *array.Int64:
					kept = append(kept, c.Value(i))
				default:
					t.Fatalf("%s: column %s is %s, want an integer", path, column, col.DataType())
				}
			}
			pos++
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if len(deleted) > 0 {
		t.Fatalf("%s: deleted rows %v lie beyond its %d rows", path, deleted, pos)
	}
	return kept
}

var memTables atomic.Int64

// openStore opens a fresh table in memory ("mem") or in a temporary
// directory ("file").
func openStore(t *testing.T, scheme string) *storage.Bucket {
	if scheme == "file" {
		return storagetest.Open(t, "file://"+t.TempDir())
	}
	return storagetest.Open(t, fmt.Sprintf("mem://dv-test/t%d", memTables.Add(1)))
}

func openMem(t *testing.T) *storage.Bucket { return openStore(t, "mem") }
