package lanceformat

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// pb appends protobuf fields to a message being built. Zero scalars and
// empty strings are omitted (proto3 defaults) unless a *Always variant is
// used for fields whose presence matters (optional fields).
type pb []byte

func (b *pb) uint(n protowire.Number, v uint64) {
	if v != 0 {
		b.uintAlways(n, v)
	}
}

func (b *pb) uintAlways(n protowire.Number, v uint64) {
	*b = protowire.AppendTag(*b, n, protowire.VarintType)
	*b = protowire.AppendVarint(*b, v)
}

// int32 encodes a signed int32 the protobuf way: negative values take ten
// bytes (Lance's parent_id -1).
func (b *pb) int32(n protowire.Number, v int32) { b.uint(n, uint64(int64(v))) }

func (b *pb) bool(n protowire.Number, v bool) {
	if v {
		b.uintAlways(n, 1)
	}
}

func (b *pb) str(n protowire.Number, s string) {
	if s != "" {
		b.bytesAlways(n, []byte(s))
	}
}

func (b *pb) bytes(n protowire.Number, v []byte) {
	if len(v) > 0 {
		b.bytesAlways(n, v)
	}
}

func (b *pb) bytesAlways(n protowire.Number, v []byte) {
	*b = protowire.AppendTag(*b, n, protowire.BytesType)
	*b = protowire.AppendBytes(*b, v)
}

// msg always emits the sub-message: presence selects oneof members.
func (b *pb) msg(n protowire.Number, m pb) { b.bytesAlways(n, m) }

func (b *pb) packed(n protowire.Number, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var body []byte
	for _, v := range vs {
		body = protowire.AppendVarint(body, v)
	}
	b.bytesAlways(n, body)
}

func (b *pb) stringMap(n protowire.Number, m map[string]string) {
	for _, k := range sortedKeys(m) {
		var e pb
		e.str(1, k)
		e.str(2, m[k])
		b.msg(n, e)
	}
}

// raw appends already encoded fields (carried-through unknown fields).
func (b *pb) raw(v []byte) { *b = append(*b, v...) }

// field is one decoded protobuf field.
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // varint, fixed32 and fixed64 values
	b   []byte // bytes value (aliases the input)
	raw []byte // the whole field, tag included (aliases the input)
}

// eachField calls fn for every field of msg in order. Malformed input is an
// error; fn's error stops the walk.
func eachField(msg []byte, fn func(f field) error) error {
	for len(msg) > 0 {
		start := msg
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("bad protobuf tag: %w", protowire.ParseError(n))
		}
		f := field{num: num, typ: typ}
		msg = msg[n:]
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(msg)
			f.u = uint64(v)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("bad protobuf field %d: %w", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		f.raw = start[:len(start)-len(msg)]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// wantType checks a field's wire type against the schema's.
func (f field) wantType(t protowire.Type) error {
	if f.typ != t {
		return fmt.Errorf("protobuf field %d has wire type %d, want %d", f.num, f.typ, t)
	}
	return nil
}

// uints decodes a repeated varint field, packed or not, appending to dst.
func (f field) uints(dst []uint64) ([]uint64, error) {
	switch f.typ {
	case protowire.VarintType:
		return append(dst, f.u), nil
	case protowire.BytesType:
		b := f.b
		for len(b) > 0 {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("bad packed field %d: %w", f.num, protowire.ParseError(n))
			}
			dst = append(dst, v)
			b = b[n:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("protobuf field %d: wire type %d is not a repeated varint", f.num, f.typ)
}

// mapEntry decodes a map<string, string|bytes> entry.
func mapEntry(b []byte) (string, []byte, error) {
	var k string
	var v []byte
	err := eachField(b, func(f field) error {
		switch f.num {
		case 1:
			k = string(f.b)
		case 2:
			v = f.b
		}
		return nil
	})
	return k, v, err
}
