package parquetio

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// maxFooterStatBytes bounds a column chunk's min or max value in the
// footer, as parquet-mr does (it leaves out statistics whose values exceed
// 4 KiB): parquet-go copies whole values, so a column of large binary
// values made a footer of megabytes that every reader loads. A chunk
// whose min or max is longer keeps its null count and loses both bounds;
// cutting them instead would leave readers that trust footer bounds as
// exact (aggregate push-down) with wrong answers.
const maxFooterStatBytes = 4096

// boundFooterStats rewrites the file tail parquet-go wrote at Close (page
// indexes, then the Thrift FileMetaData, its 4-byte length and "PAR1") with
// over-long chunk bounds left out. Only the FileMetaData changes, so the
// offsets it holds stay true.
func boundFooterStats(tail []byte) ([]byte, error) {
	if len(tail) < 8 || string(tail[len(tail)-4:]) != "PAR1" {
		return nil, fmt.Errorf("parquetio: the file tail does not end with a footer")
	}
	n := int(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	start := len(tail) - 8 - n
	if n <= 0 || start < 0 {
		return nil, fmt.Errorf("parquetio: footer length %d outside the tail of %d bytes", n, len(tail))
	}
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), tail[start:len(tail)-8], &meta); err != nil {
		return nil, fmt.Errorf("parquetio: decode the footer: %w", err)
	}
	changed := false
	for i := range meta.RowGroups {
		for j := range meta.RowGroups[i].Columns {
			st := &meta.RowGroups[i].Columns[j].MetaData.Statistics
			if max(len(st.MinValue), len(st.MaxValue), len(st.Min), len(st.Max)) > maxFooterStatBytes {
				st.MinValue, st.MaxValue, st.Min, st.Max = nil, nil, nil, nil
				changed = true
			}
		}
	}
	if !changed {
		return tail, nil
	}
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		return nil, fmt.Errorf("parquetio: encode the footer: %w", err)
	}
	var out bytes.Buffer
	out.Grow(start + len(enc) + 8)
	out.Write(tail[:start])
	out.Write(enc)
	out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(enc))))
	out.WriteString("PAR1")
	return out.Bytes(), nil
}
