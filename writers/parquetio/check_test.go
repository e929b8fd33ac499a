package parquetio

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
)

// layoutSeeds are a valid file, the same cut short, one whose 9-byte footer
// claims 2^25 schema elements (parquet-go allocated 3 GiB for it), and one
// whose first page header is rewritten to claim 2^31-1 uncompressed bytes
// (its longer varint also pushes the page past its chunk).
func layoutSeeds(t testing.TB) map[string][]byte {
	type row struct {
		Path string `parquet:"path"`
		Size int64  `parquet:"size,optional"`
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []row{{"a", 1}, {"b", 2}}, parquet.Compression(&parquet.Uncompressed)); err != nil {
		t.Fatal(err)
	}
	valid := buf.Bytes()
	foot := []byte{0x15, 0x02, 0x19, 0xFC, 0xFF, 0xFF, 0xFF, 0x0F, 0x00}
	lists := append(append([]byte("PAR1"), foot...), 9, 0, 0, 0)
	lists = append(lists, "PAR1"...)
	// The first page header follows the magic: type (field 1) and
	// uncompressed_page_size (field 2), compact i32s (header 0x15, zigzag
	// varint); the latter is made 2^31-1.
	if valid[4] != 0x15 || valid[6] != 0x15 {
		t.Fatalf("unexpected page header % x", valid[4:12])
	}
	end := 7
	for valid[end]&0x80 != 0 {
		end++
	}
	page := append(bytes.Clone(valid[:7]), 0xFE, 0xFF, 0xFF, 0xFF, 0x0F)
	page = append(page, valid[end+1:]...)
	return map[string][]byte{"valid": valid, "truncated": valid[:len(valid)/2], "lists": lists, "page": page}
}

// FuzzOpenChecked: no input makes OpenChecked panic, and what it accepts
// parquet-go reads without panicking.
func FuzzOpenChecked(f *testing.F) {
	for _, s := range layoutSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := OpenChecked(b)
		if err != nil {
			return
		}
		for _, rg := range file.RowGroups() {
			rows := rg.Rows()
			buf := make([]parquet.Row, 16)
			for {
				if n, err := rows.ReadRows(buf); n == 0 || err != nil {
					break
				}
			}
			rows.Close()
		}
	})
}

func TestOpenCheckedAllocationBounded(t *testing.T) {
	for name, b := range layoutSeeds(t) {
		var err error
		alloccheck.Below(t, name, func() { _, err = OpenChecked(b) })
		if (name == "valid") != (err == nil) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// TestCheckPagesLimits: page headers stating more than the limits are
// refused before a reader allocates for them.
func TestCheckPagesLimits(t *testing.T) {
	// Compact i32 fields 1 (type), 2 (uncompressed), 3 (compressed), a
	// data_page_header (field 5) with num_values (field 1), stop.
	header := func(uncompressed, values []byte) []byte {
		h := append([]byte{0x15, 0x00, 0x15}, uncompressed...)
		h = append(h, 0x15, 0x00, 0x2C, 0x15)
		return append(append(h, values...), 0x00, 0x00)
	}
	small, huge := []byte{0x02}, []byte{0xFE, 0xFF, 0xFF, 0xFF, 0x0F}
	if err := checkPages(header(small, small), 4, 4); err != nil {
		t.Fatalf("small page: %v", err)
	}
	for name, h := range map[string][]byte{"uncompressed": header(huge, small), "values": header(small, huge)} {
		if err := checkPages(h, 4, 4); err == nil {
			t.Errorf("%s: 2^31-1 accepted", name)
		}
	}
}

// TestOpenCheckedChunkOffsets: parquet-go reads a chunk from its
// dictionary page offset whenever one is set and seeks to its data page
// offset: a dictionary offset after the data (pointing at a page header
// that claims 2 GiB) and a data offset inside a page are refused, not
// read past the check.
func TestOpenCheckedChunkOffsets(t *testing.T) {
	valid := layoutSeeds(t)["valid"]
	n := int(binary.LittleEndian.Uint32(valid[len(valid)-8:]))
	footStart := len(valid) - 8 - n
	// A page header claiming 2^31-1 bytes both ways, after the data.
	evil := int64(footStart)
	hostile := []byte{0x15, 0x00, 0x15, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F, 0x15, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F, 0x00}
	rewrite := func(edit func(md *format.ColumnMetaData)) []byte {
		var meta format.FileMetaData
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), valid[footStart:len(valid)-8], &meta); err != nil {
			t.Fatal(err)
		}
		edit(&meta.RowGroups[0].Columns[0].MetaData)
		enc, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
		if err != nil {
			t.Fatal(err)
		}
		out := append(append(slices.Clone(valid[:footStart]), hostile...), enc...)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
		return append(out, "PAR1"...)
	}
	cases := map[string][]byte{
		"dictionary after the data": rewrite(func(md *format.ColumnMetaData) { md.DictionaryPageOffset = evil }),
		"negative dictionary":       rewrite(func(md *format.ColumnMetaData) { md.DictionaryPageOffset = -1 }),
		"data inside a page": rewrite(func(md *format.ColumnMetaData) {
			md.DictionaryPageOffset = md.DataPageOffset
			md.DataPageOffset++
		}),
	}
	if _, err := OpenChecked(rewrite(func(*format.ColumnMetaData) {})); err != nil {
		t.Fatalf("the file with bytes between its data and its footer: %v", err)
	}
	for name, b := range cases {
		var err error
		alloccheck.Below(t, name, func() { _, err = OpenChecked(b) })
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
