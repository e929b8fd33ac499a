package ipccheck

import (
	"encoding/binary"
	"fmt"
)

// fbuf reads a flatbuffer whose every offset, vtable and vector length is
// checked against the bytes present: reading hostile bytes returns an
// error, never panics or allocates more than the bytes hold. arrow-go's
// generated accessors check nothing (and are internal), so the IPC headers
// are walked with this before arrow-go decodes them (message.go).
type fbuf []byte

// fbTable is a checked flatbuffer table. Its fields are checked against
// the buffer, not against the table size its vtable states: flatbuffers'
// Go builder shares a vtable between tables with the same field offsets
// whatever their sizes, so that size may be another table's.
type fbTable struct {
	buf   fbuf
	pos   int // the table's start (its vtable offset)
	vt    int // the vtable's start
	vtLen int // vtable length in bytes
}

func (b fbuf) u16(at int) int { return int(binary.LittleEndian.Uint16(b[at:])) }
func (b fbuf) u32(at int) uint32 {
	return binary.LittleEndian.Uint32(b[at:])
}

// has reports whether [at, at+n) lies within b, without overflow.
func (b fbuf) has(at int, n uint64) bool {
	return at >= 0 && uint64(at) <= uint64(len(b)) && n <= uint64(len(b)-at)
}

// root returns the root table.
func (b fbuf) root() (fbTable, error) {
	if !b.has(0, 4) {
		return fbTable{}, fmt.Errorf("%d bytes are too short for a flatbuffer", len(b))
	}
	return b.table(uint64(b.u32(0)))
}

// table checks the table at pos: its vtable and its extent lie within b.
func (b fbuf) table(pos uint64) (fbTable, error) {
	if pos > uint64(len(b)) || !b.has(int(pos), 4) {
		return fbTable{}, fmt.Errorf("table offset %d is outside the %d bytes", pos, len(b))
	}
	p := int(pos)
	vt := int64(p) - int64(int32(b.u32(p)))
	if vt < 0 || vt > int64(len(b)) || !b.has(int(vt), 4) {
		return fbTable{}, fmt.Errorf("vtable of the table at %d is outside the %d bytes", p, len(b))
	}
	t := fbTable{buf: b, pos: p, vt: int(vt), vtLen: b.u16(int(vt))}
	if t.vtLen < 4 || t.vtLen%2 != 0 || !b.has(t.vt, uint64(t.vtLen)) {
		return fbTable{}, fmt.Errorf("vtable of the table at %d has a bad length %d", p, t.vtLen)
	}
	return t, nil
}

// field returns the position of field slot, size bytes long, or ok false
// when the table does not store it (the field has its default).
func (t fbTable) field(slot, size int) (at int, ok bool, err error) {
	e := 4 + 2*slot
	if e+2 > t.vtLen {
		return 0, false, nil
	}
	fo := t.buf.u16(t.vt + e)
	if fo == 0 {
		return 0, false, nil
	}
	if !t.buf.has(t.pos+fo, uint64(size)) {
		return 0, false, fmt.Errorf("field %d of the table at %d lies outside the %d bytes", slot, t.pos, len(t.buf))
	}
	return t.pos + fo, true, nil
}

// scalar returns field slot, a little-endian integer of size bytes (1, 2,
// 4 or 8), or def when absent.
func (t fbTable) scalar(slot, size int, def int64) (int64, error) {
	at, ok, err := t.field(slot, size)
	if err != nil || !ok {
		return def, err
	}
	switch size {
	case 1:
		return int64(int8(t.buf[at])), nil
	case 2:
		return int64(int16(t.buf.u16(at))), nil
	case 4:
		return int64(int32(t.buf.u32(at))), nil
	}
	return int64(binary.LittleEndian.Uint64(t.buf[at:])), nil
}

// ref follows the offset stored in field slot; ok is false when absent.
func (t fbTable) ref(slot int) (pos uint64, ok bool, err error) {
	at, ok, err := t.field(slot, 4)
	if err != nil || !ok {
		return 0, false, err
	}
	return uint64(at) + uint64(t.buf.u32(at)), true, nil
}

// sub returns the table field slot points to.
func (t fbTable) sub(slot int) (fbTable, bool, error) {
	pos, ok, err := t.ref(slot)
	if err != nil || !ok {
		return fbTable{}, false, err
	}
	sub, err := t.buf.table(pos)
	return sub, err == nil, err
}

// fbVector is a checked vector: n elements of size bytes from start.
type fbVector struct {
	buf   fbuf
	start int
	n     int
	size  int
}

// vector returns the vector field slot points to; its n elements of size
// bytes are within the buffer. An absent vector is empty.
func (t fbTable) vector(slot, size int) (fbVector, error) {
	pos, ok, err := t.ref(slot)
	if err != nil || !ok {
		return fbVector{buf: t.buf, size: size}, err
	}
	if pos > uint64(len(t.buf)) || !t.buf.has(int(pos), 4) {
		return fbVector{}, fmt.Errorf("vector offset %d is outside the %d bytes", pos, len(t.buf))
	}
	n := uint64(t.buf.u32(int(pos)))
	start := int(pos) + 4
	if !t.buf.has(start, n*uint64(size)) {
		return fbVector{}, fmt.Errorf("a vector of %d elements of %d bytes does not fit in the %d bytes", n, size, len(t.buf))
	}
	return fbVector{buf: t.buf, start: start, n: int(n), size: size}, nil
}

// at returns the position of element i.
func (v fbVector) at(i int) int { return v.start + i*v.size }

// table returns element i of a vector of tables.
func (v fbVector) table(i int) (fbTable, error) {
	at := v.at(i)
	return v.buf.table(uint64(at) + uint64(v.buf.u32(at)))
}

// word returns the k-th 8-byte integer of element i: a vector of longs
// (k 0) or of structs of longs (FieldNode, Buffer).
func (v fbVector) word(i, k int) int64 {
	return int64(binary.LittleEndian.Uint64(v.buf[v.at(i)+8*k:]))
}

// str returns the string field slot points to (empty when absent),
// checked to lie within the buffer.
func (t fbTable) str(slot int) ([]byte, error) {
	v, err := t.vector(slot, 1)
	if err != nil {
		return nil, err
	}
	return v.buf[v.start : v.start+v.n], nil
}
