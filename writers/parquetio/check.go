package parquetio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// Parquet readers size slices by the element counts of the Thrift footer
// and buffers by the sizes of each page header before reading them:
// parquet-go allocates 3 GiB for a 9-byte footer claiming 2^25 schema
// elements. OpenChecked bounds both by the bytes present, so a file
// another process wrote can be handed to them.

// Limits on what one page may declare. Spark, delta-rs and parquet-go cut
// pages at about 1 MiB and 20,000 rows; far larger ones are refused rather
// than allocated.
const (
	maxPageBytes  = 256 << 20 // uncompressed_page_size
	maxPageValues = 1 << 24   // num_values (levels and indexes are sized by it)
)

// maxThriftDepth bounds the nesting of Thrift structs and containers.
const maxThriftDepth = 64

var errThriftShort = errors.New("thrift value runs past its bytes")

// CheckLayout validates the structure of the Parquet file b before a
// reader allocates by it: every list, map and binary length of the
// footer fits in the footer's bytes, every column chunk lies in the file,
// and every page header of every chunk states a compressed size within
// the chunk and an uncompressed size and value count within the limits
// above. It does not decode values. Errors name the byte offset. It
// returns the file opened by parquet-go over b, without page indexes and
// Bloom filters (their lengths are not checked).
func OpenChecked(b []byte) (*parquet.File, error) {
	n := len(b)
	if n < 12 || string(b[:4]) != "PAR1" || string(b[n-4:]) != "PAR1" {
		return nil, errors.New("parquet: no PAR1 magic at both ends (encrypted or not Parquet)")
	}
	footLen := int(binary.LittleEndian.Uint32(b[n-8:]))
	if footLen > n-12 {
		return nil, fmt.Errorf("parquet: footer of %d bytes does not fit in a file of %d", footLen, n)
	}
	footStart := n - 8 - footLen
	if _, err := walkThrift(b[footStart:n-8], nil); err != nil {
		return nil, fmt.Errorf("parquet: footer at offset %d: %w", footStart, err)
	}
	// The footer is safe to decode now; parquet-go reads it for the chunks.
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(n), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("parquet: footer at offset %d: %w", footStart, err)
	}
	for g, rg := range f.Metadata().RowGroups {
		for c, cc := range rg.Columns {
			md := &cc.MetaData
			// parquet-go reads a chunk from its dictionary page offset
			// whenever one is set, and seeks to its data page offset to
			// skip rows: the first must not follow the second, which must
			// start a page.
			start := md.DataPageOffset
			if md.DictionaryPageOffset != 0 {
				if md.DictionaryPageOffset > md.DataPageOffset {
					return nil, fmt.Errorf("parquet: row group %d column %d: dictionary page offset %d follows data page offset %d", g, c, md.DictionaryPageOffset, md.DataPageOffset)
				}
				start = md.DictionaryPageOffset
			}
			if start < 4 || md.TotalCompressedSize < 0 || md.TotalCompressedSize > int64(footStart)-start {
				return nil, fmt.Errorf("parquet: row group %d column %d: chunk at offset %d of %d bytes is outside the data", g, c, start, md.TotalCompressedSize)
			}
			if err := checkPages(b[start:start+md.TotalCompressedSize], start, md.DataPageOffset); err != nil {
				return nil, fmt.Errorf("parquet: row group %d column %d: %w", g, c, err)
			}
		}
	}
	return f, nil
}

// checkPages walks the page headers of one column chunk starting at file
// offset base; one of them must start at file offset data.
func checkPages(chunk []byte, base, data int64) error {
	atData := false
	for pos := 0; pos < len(chunk); {
		atData = atData || base+int64(pos) == data
		var compressed, uncompressed, values int64 = -1, -1, 0
		h, err := walkThrift(chunk[pos:], func(path []int16, v int64) {
			switch {
			case len(path) == 1 && path[0] == 2:
				uncompressed = v
			case len(path) == 1 && path[0] == 3:
				compressed = v
			case len(path) == 2 && path[1] == 1 && (path[0] == 5 || path[0] == 7 || path[0] == 8):
				values = v // num_values of the data, dictionary or v2 page header
			}
		})
		at := base + int64(pos)
		switch {
		case err != nil:
			return fmt.Errorf("page header at offset %d: %w", at, err)
		case compressed < 0 || compressed > int64(len(chunk)-pos-h):
			return fmt.Errorf("page at offset %d: compressed size %d runs past its chunk", at, compressed)
		case uncompressed < 0 || uncompressed > maxPageBytes:
			return fmt.Errorf("page at offset %d: uncompressed size %d is over the limit of %d", at, uncompressed, maxPageBytes)
		case values < 0 || values > maxPageValues:
			return fmt.Errorf("page at offset %d: %d values is over the limit of %d", at, values, maxPageValues)
		}
		pos += h + int(compressed)
	}
	if !atData && len(chunk) > 0 {
		return fmt.Errorf("data page offset %d starts no page of the chunk at offset %d", data, base)
	}
	return nil
}

// walkThrift checks the Thrift compact-protocol struct at the start of b
// and returns its length. ints, when not nil, sees every integer field
// with the field ids leading to it.
func walkThrift(b []byte, ints func(path []int16, v int64)) (int, error) {
	w := &thriftWalk{b: b, ints: ints}
	if err := w.structure(0); err != nil {
		return 0, err
	}
	return w.pos, nil
}

type thriftWalk struct {
	b    []byte
	pos  int
	path []int16
	ints func(path []int16, v int64)
}

func (w *thriftWalk) byte() (byte, error) {
	if w.pos >= len(w.b) {
		return 0, errThriftShort
	}
	w.pos++
	return w.b[w.pos-1], nil
}

func (w *thriftWalk) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.pos:])
	if n <= 0 {
		return 0, errThriftShort
	}
	w.pos += n
	return v, nil
}

// count reads a container size and checks that count elements of at least
// minSize bytes each fit in the bytes left.
func (w *thriftWalk) count(v uint64, minSize int) (int, error) {
	if v > uint64((len(w.b)-w.pos)/minSize) {
		return 0, fmt.Errorf("container of %d elements in %d bytes", v, len(w.b)-w.pos)
	}
	return int(v), nil
}

func (w *thriftWalk) structure(depth int) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("nested deeper than %d", maxThriftDepth)
	}
	var id int16
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		typ := h & 0x0F
		if typ == 0 {
			return nil // stop
		}
		if delta := int16(h >> 4); delta != 0 {
			id += delta
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int16(int64(v>>1) ^ -int64(v&1))
		}
		w.path = append(w.path, id)
		err = w.value(typ, depth)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
	}
}

// value checks one value of compact type typ (1/2 are booleans held in
// the field header; in containers they take a byte).
func (w *thriftWalk) value(typ byte, depth int) error {
	switch typ {
	case 1, 2:
		return nil
	case 3:
		_, err := w.byte()
		return err
	case 4, 5, 6:
		v, err := w.uvarint()
		if err == nil && w.ints != nil {
			w.ints(w.path, int64(v>>1)^-int64(v&1))
		}
		return err
	case 7:
		if len(w.b)-w.pos < 8 {
			return errThriftShort
		}
		w.pos += 8
		return nil
	case 8:
		v, err := w.uvarint()
		if err != nil {
			return err
		}
		if v > uint64(len(w.b)-w.pos) {
			return fmt.Errorf("binary of %d bytes in %d", v, len(w.b)-w.pos)
		}
		w.pos += int(v)
		return nil
	case 9, 10:
		h, err := w.byte()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 0x0F {
			if size, err = w.uvarint(); err != nil {
				return err
			}
		}
		n, err := w.count(size, 1)
		if err != nil {
			return err
		}
		return w.elements(n, h&0x0F, 0, depth)
	case 11:
		size, err := w.uvarint()
		if err != nil || size == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		n, err := w.count(size, 2)
		if err != nil {
			return err
		}
		return w.elements(n, kv>>4, kv&0x0F, depth)
	case 12:
		return w.structure(depth + 1)
	}
	return fmt.Errorf("unknown thrift type %d", typ)
}

// elements checks n container elements of type t (and, for maps, values
// of type v).
func (w *thriftWalk) elements(n int, t, v byte, depth int) error {
	if depth+1 > maxThriftDepth {
		return fmt.Errorf("nested deeper than %d", maxThriftDepth)
	}
	for range n {
		for _, typ := range []byte{t, v} {
			if typ == 0 {
				continue
			}
			if typ == 1 || typ == 2 {
				typ = 3 // a boolean element is a byte
			}
			if err := w.value(typ, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
