package lanceenc

import (
	"encoding/binary"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/zstd"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/encodings21pb"
)

// Full-zip pages (format 2.1+), Lance's layout for values too wide for a
// mini-block chunk: strings and binaries over maxMiniValue, vectors wider
// than that, and pages whose lists are so sparse that two values' levels
// overflow a chunk. Every item is its control word (the repetition level
// above the definition level, 1, 2 or 4 bytes) followed, for a visible
// item, by its value: fixed-width bytes, or (valid items only) a length
// and the bytes. A repetition index, the byte offset where each row starts
// and the end, lets readers find rows without unzipping; as Lance does, it
// is written for variable-width values and for pages with lists.

// zipped is a page's values ready to zip: n fixed-width values of width
// bytes, or variable-width values data[offs[i]:offs[i+1]].
type zipped struct {
	n       int
	width   int // 0: variable width
	data    []byte
	offs    []uint64
	offBits int // variable: bits of each stored length (32, or 64 for large types)
	enc     *encodings21pb.CompressiveEncoding
}

// zipValues returns the values of a full-zip page of type dt (bools,
// which Lance never full-zips, are refused).
func zipValues(dt arrow.DataType, vals []arrow.Array, rows int) (*zipped, error) {
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		b, ew, err := vectorValues(t, vals)
		if err != nil {
			return nil, err
		}
		return &zipped{n: rows, width: len(b) / max(rows, 1), data: b, enc: fslEncoding(t, ew)}, nil
	case arrow.BinaryDataType:
		offs, data, _ := varValues(vals, rows, exactBuf)
		return zipVariable(dt, offs, data)
	case arrow.FixedWidthDataType:
		if dt.ID() != arrow.BOOL {
			b, _ := FixedValues(dt, vals)
			return &zipped{n: rows, width: t.BitWidth() / 8, data: b, enc: flatEncoding(t.BitWidth())}, nil
		}
	}
	return nil, writers.Errorf(writers.ErrInvalid, "lance: a %s list column this sparse (more empty or null lists around its values than a Lance 2.1/2.2 mini-block chunk holds) is not written by Quiver: write the dataset with data_storage_version \"2.0\"", dt)
}

// zipVariable stores variable-width values; each value is zstd-compressed
// on its own (Lance's per-value general compression) when a sample of
// the page shrinks by an eighth or more.
func zipVariable(dt arrow.DataType, offs []uint64, data []byte) (*zipped, error) {
	ob := 32
	if dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY {
		ob = 64
	}
	z := &zipped{n: len(offs) - 1, offBits: ob, offs: offs, data: data, enc: variableEncoding(ob)}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	sample := data[:min(len(data), 64<<10)]
	if len(sample) < 64 || len(enc.EncodeAll(sample, nil))*8 >= len(sample)*7 {
		return z, nil
	}
	out := make([]byte, 0, len(data)/2)
	nOffs := make([]uint64, 1, len(offs))
	for i := range z.n {
		if v := data[offs[i]:offs[i+1]]; len(v) > 0 {
			out = enc.EncodeAll(v, binary.LittleEndian.AppendUint64(out, uint64(len(v))))
		}
		nOffs = append(nOffs, uint64(len(out)))
	}
	z.data, z.offs = out, nOffs
	z.enc = &encodings21pb.CompressiveEncoding{Compression: &encodings21pb.CompressiveEncoding_General{General: &encodings21pb.General{
		Compression: &encodings21pb.BufferCompression{Scheme: encodings21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD},
		Values:      z.enc}}}
	return z, nil
}

// encodeFullZip zips a leaf's levels and values into one page of topRows
// rows.
func encodeFullZip(z *zipped, layers []encodings21pb.RepDefLayer, rep, def []uint16, maxRep uint16, topRows int) Page {
	bitsRep, bitsDef := 0, 0
	if rep != nil {
		bitsRep = bits.Len16(maxRep)
	}
	if def != nil {
		bitsDef = bits.Len16(maxDefLevel(layers))
	}
	ctl := controlBytes(bitsRep + bitsDef)
	items := z.n
	if rep != nil {
		items = len(rep)
	} else if def != nil {
		items = len(def)
	}
	indexed := rep != nil || z.width == 0
	maxVisible := visibleDef(layers)
	size := len(z.data) + items*ctl
	if z.width == 0 {
		size += z.n * z.offBits / 8
	}
	out := make([]byte, 0, size)
	var starts []uint64
	if indexed {
		starts = make([]uint64, 0, topRows+1)
	}
	v := 0
	for i := range items {
		var r, d uint16
		if rep != nil {
			r = rep[i]
		}
		if def != nil {
			d = def[i]
		}
		if indexed && (rep == nil || r == maxRep) {
			starts = append(starts, uint64(len(out)))
		}
		w := uint32(r)<<bitsDef | uint32(d)
		for k := range ctl {
			out = append(out, byte(w>>(8*k)))
		}
		if d > maxVisible {
			continue
		}
		switch {
		case z.width > 0:
			out = append(out, z.data[v*z.width:(v+1)*z.width]...)
		case d == 0:
			val := z.data[z.offs[v]:z.offs[v+1]]
			if z.offBits == 64 {
				out = binary.LittleEndian.AppendUint64(out, uint64(len(val)))
			} else {
				out = binary.LittleEndian.AppendUint32(out, uint32(len(val)))
			}
			out = append(out, val...)
		}
		v++
	}
	fz := &encodings21pb.FullZipLayout{
		BitsRep:          uint32(bitsRep),
		BitsDef:          uint32(bitsDef),
		NumItems:         uint32(items),
		NumVisibleItems:  uint32(z.n),
		ValueCompression: z.enc,
		Layers:           layers,
	}
	if z.width > 0 {
		fz.Details = &encodings21pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(z.width * 8)}
	} else {
		fz.Details = &encodings21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: uint32(z.offBits)}
	}
	bufs := [][]byte{out}
	if indexed {
		starts = append(starts, uint64(len(out)))
		bufs = append(bufs, bytePack(starts, uint64(len(out))))
	}
	return Page{Length: uint64(topRows), Bufs: bufs, Layout: &encodings21pb.PageLayout{
		Layout: &encodings21pb.PageLayout_FullZipLayout{FullZipLayout: fz}}}
}

// bytePack stores integers up to max in the fewest of 1, 2, 4 or 8 bytes
// each (Lance's byte-packed repetition index; readers infer the width
// from the buffer's length).
func bytePack(vals []uint64, max uint64) []byte {
	w := 8
	switch {
	case max <= 0xff:
		w = 1
	case max <= 0xffff:
		w = 2
	case max <= 0xffffffff:
		w = 4
	}
	out := make([]byte, len(vals)*w)
	for i, v := range vals {
		putWord(out, w*8, i, v)
	}
	return out
}
