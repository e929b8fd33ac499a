package lancefile

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Packed structs (format 2.1+): a struct whose field metadata says
// lance-encoding:packed is stored by pylance as one column of whole rows,
// its fixed-width fields side by side (PackedStruct), instead of a column
// per field. Quiver reads them (it never writes them).

// isPacked reports a struct field Lance packs (its metadata "packed" or
// "lance-encoding:packed" is true, in any case).
func isPacked(meta map[string][]byte) bool {
	for _, k := range []string{"packed", "lance-encoding:packed"} {
		if v, ok := meta[k]; ok && strings.EqualFold(string(v), "true") {
			return true
		}
	}
	return false
}

// blobKey marks a binary field Lance stores out of line (a blob), set to
// any value.
const blobKey = "lance-encoding:blob"

// blobV2 is the Arrow extension name of a blob v2 column (format 2.2):
// a struct of the value's bytes or URI, stored as descriptions.
const blobV2 = "lance.blob.v2"

// isBlobV2 reports a blob v2 field.
func isBlobV2(meta map[string][]byte) bool {
	return string(meta["ARROW:extension:name"]) == blobV2
}

// CheckLayouts refuses, as ErrInvalid naming the column, fields whose
// metadata asks Lance for a column layout Quiver does not write: packed
// structs (one column of whole rows) and blobs (values stored out of
// line; blob v2 Quiver does not read either). Other lance-encoding hints
// (compression, byte-stream split) only pick encodings, which every
// reader decodes. A dataset with such columns is not writable
// (Dataset.CheckWritable): Quiver's files would lack their layout.
func (s *Schema) CheckLayouts() error {
	for _, f := range s.Fields {
		if isBlobV2(f.Metadata) {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q is a Lance blob v2 column (extension %s, format 2.2), which Quiver neither reads nor writes: write this dataset with pylance", f.Name, blobV2)
		}
		if _, blob := f.Metadata[blobKey]; blob || isPacked(f.Metadata) && f.LogicalType == "struct" {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q is a Lance packed struct or blob (its field metadata), a column layout Quiver reads but does not write: drop the metadata for a new dataset, or write this dataset with pylance", f.Name)
		}
	}
	return nil
}

// packedWidth is the bytes of one packed row of st.
func packedWidth(st *arrow.StructType) (int, error) {
	w := 0
	for _, f := range st.Fields() {
		fw, ok := f.Type.(arrow.FixedWidthDataType)
		if !ok || fw.BitWidth()%8 != 0 {
			return 0, fmt.Errorf("packed struct with a %s field is not supported", f.Type)
		}
		w += fw.BitWidth() / 8
	}
	if w == 0 {
		return 0, fmt.Errorf("packed struct without fields")
	}
	return w, nil
}

// unpackStruct splits the rows of d (fixed-size binary, one packed row
// each, its nulls the struct's and its fields') into the fields of t. The
// result is a new reference.
func unpackStruct(t *arrow.StructType, d arrow.ArrayData) arrow.ArrayData {
	rows := d.Offset() + d.Len() // the children cover the offset too
	w := d.DataType().(*arrow.FixedSizeBinaryType).ByteWidth
	packed := d.Buffers()[1].Bytes()
	kids := make([]arrow.ArrayData, t.NumFields())
	at := 0
	for k, f := range t.Fields() {
		fw := f.Type.(arrow.FixedWidthDataType).BitWidth() / 8
		buf := make([]byte, rows*fw)
		for i := range rows {
			copy(buf[i*fw:(i+1)*fw], packed[i*w+at:])
		}
		// A null row's fields are null too, as pylance reads them.
		nulls := 0
		if d.Buffers()[0] != nil {
			nulls = array.UnknownNullCount
		}
		kids[k] = array.NewData(f.Type, rows, []*memory.Buffer{d.Buffers()[0], memory.NewBufferBytes(buf)}, nil, nulls, 0)
		at += fw
	}
	out := array.NewData(t, d.Len(), d.Buffers()[:1], kids, d.NullN(), d.Offset())
	for _, k := range kids {
		k.Release()
	}
	return out
}
