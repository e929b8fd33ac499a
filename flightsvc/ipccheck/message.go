package ipccheck

import (
	"encoding/binary"
	"fmt"
)

// Hostile IPC headers. arrow-go allocates from the counts an IPC header
// claims (make([]Field, childrenLength), a buffer slice per variadic count,
// a decompression buffer of the size a compressed buffer claims) and some
// of those allocations, too large to succeed, end the process with a fatal
// "out of memory" that no recover catches. A flatbuffer may also point
// many times at one table or string, so a small header can describe an
// exponentially large schema. Every IPC header of a DoPut is therefore
// walked here, bounded, before arrow-go sees it, and refused (ErrInvalid,
// by the caller) unless:
//
//   - every offset, vtable and vector lies within the header's bytes;
//   - the schema has at most maxFields fields in all (each reference to a
//     shared table counted), nested at most maxDepth deep, at most
//     maxMetadataPairs custom metadata pairs in all, and its names and
//     metadata (each reference counted) hold no more bytes than the header;
//   - each type has the children its kind needs (one for lists and maps,
//     two for run-end encoded, none for leaves, at most 127 for unions);
//   - a record or dictionary batch has exactly the field nodes, buffers and
//     variadic buffer counts the stream's schema needs (no column more or
//     less: nothing is reinterpreted), no negative length or null count,
//     no length above maxRows of its body, and buffers within its body;
//   - compressed buffers (LZ4 frame or ZSTD) decompress to at most
//     the message limit in all.
const (
	maxFields        = 10_000
	maxDepth         = 64
	maxMetadataPairs = 65_536
	// rowsSlack is how many rows beyond eight per body byte (one bit per
	// row, as a boolean column without nulls) a batch may have, for
	// columns that take no space per row: nulls, empty structs, run ends.
	rowsSlack = 1 << 16
)

// Flatbuffer enums and slots of the Arrow IPC format (format/Message.fbs
// and format/Schema.fbs in the Arrow repository).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3

	metadataV4 = 3
	metadataV5 = 4
)

// Arrow type ids (the Type union of Schema.fbs).
const (
	typeNull = iota + 1
	typeInt
	typeFloatingPoint
	typeBinary
	typeUtf8
	typeBool
	typeDecimal
	typeDate
	typeTime
	typeTimestamp
	typeInterval
	typeList
	typeStruct
	typeUnion
	typeFixedSizeBinary
	typeFixedSizeList
	typeMap
	typeDuration
	typeLargeBinary
	typeLargeUtf8
	typeLargeList
	typeRunEndEncoded
	typeBinaryView
	typeUtf8View
	typeListView
	typeLargeListView
	typeLast = typeLargeListView
)

// Message is a checked IPC Message table.
type Message struct {
	version int64
	kind    int64 // headerSchema, ...
	header  fbTable
}

// IsSchema reports whether m is a Schema message.
func (m Message) IsSchema() bool { return m.kind == headerSchema }

// IsDictionary reports whether m is a DictionaryBatch message.
func (m Message) IsDictionary() bool { return m.kind == headerDictionaryBatch }

// ParseMessage checks the Message table of header and its custom metadata.
func ParseMessage(header []byte) (Message, error) {
	b := fbuf(header)
	msg, err := b.root()
	if err != nil {
		return Message{}, err
	}
	var m Message
	if m.version, err = msg.scalar(0, 2, 0); err != nil {
		return m, err
	}
	if m.version != metadataV4 && m.version != metadataV5 {
		return m, fmt.Errorf("metadata version %d is not supported (V4 or V5)", m.version+1)
	}
	if m.kind, err = msg.scalar(1, 1, 0); err != nil {
		return m, err
	}
	var ok bool
	if m.header, ok, err = msg.sub(2); err != nil || !ok {
		return m, errOr(err, "the message has no header")
	}
	if n, err := msg.scalar(3, 8, 0); err != nil || n < 0 {
		return m, errOr(err, "negative body length")
	}
	c := counter{strLimit: len(header)}
	return m, c.metadata(msg, 4)
}

func errOr(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return fmt.Errorf(format, args...)
}

// column is what a batch must carry for one field: the Arrow type id, the
// union mode, whether it is dictionary encoded (then the batch carries its
// indices; the values come in dictionary batches) and its children.
type column struct {
	name     string
	typ      int64
	dense    bool
	dict     bool
	children []*column
}

// Layout is what a stream's schema asks of its batches.
type Layout struct {
	cols  []*column
	dicts map[int64]*column // dictionary id → the values' column
}

// counter bounds a schema walk.
type counter struct {
	fields   int
	pairs    int
	strBytes int
	strLimit int
}

// str checks string field slot of t and counts its bytes.
func (c *counter) str(t fbTable, slot int) ([]byte, error) {
	s, err := t.str(slot)
	if err != nil {
		return nil, err
	}
	c.strBytes += len(s)
	if c.strBytes > c.strLimit {
		return nil, fmt.Errorf("names and metadata refer to more bytes than the %d-byte header holds", c.strLimit)
	}
	return s, nil
}

// metadata checks the custom metadata vector of t at slot.
func (c *counter) metadata(t fbTable, slot int) error {
	v, err := t.vector(slot, 4)
	if err != nil {
		return err
	}
	if c.pairs += v.n; c.pairs > maxMetadataPairs {
		return fmt.Errorf("more than %d custom metadata pairs", maxMetadataPairs)
	}
	for i := range v.n {
		kv, err := v.table(i)
		if err != nil {
			return err
		}
		if _, err := c.str(kv, 0); err != nil {
			return err
		}
		if _, err := c.str(kv, 1); err != nil {
			return err
		}
	}
	return nil
}

// CheckSchema checks a Schema header and returns what its batches must
// carry.
func CheckSchema(m Message, headerLen int) (*Layout, error) {
	if m.kind != headerSchema {
		return nil, fmt.Errorf("expected a schema message, got message type %d", m.kind)
	}
	c := counter{strLimit: headerLen}
	s := m.header
	if err := scalars(s, [][2]int{{0, 2}}); err != nil { // endianness
		return nil, err
	}
	if err := c.metadata(s, 2); err != nil {
		return nil, err
	}
	if _, err := s.vector(3, 8); err != nil { // features
		return nil, err
	}
	fields, err := s.vector(1, 4)
	if err != nil {
		return nil, err
	}
	l := &Layout{dicts: map[int64]*column{}}
	for i := range fields.n {
		f, err := fields.table(i)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", i, err)
		}
		col, err := c.field(f, 1, l)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", i, err)
		}
		l.cols = append(l.cols, col)
	}
	return l, nil
}

// field checks a Field table at nesting depth.
func (c *counter) field(f fbTable, depth int, l *Layout) (*column, error) {
	if c.fields++; c.fields > maxFields {
		return nil, fmt.Errorf("more than %d fields in all", maxFields)
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("fields nested more than %d deep", maxDepth)
	}
	name, err := c.str(f, 0)
	if err != nil {
		return nil, err
	}
	col := &column{name: string(name[:min(len(name), 64)])} // for messages

	if err := c.metadata(f, 6); err != nil {
		return nil, fmt.Errorf("%q: %w", col.name, err)
	}
	if err := scalars(f, [][2]int{{1, 1}}); err != nil { // nullable
		return nil, err
	}
	if col.typ, err = f.scalar(2, 1, 0); err != nil {
		return nil, err
	}
	if col.typ < typeNull || col.typ > typeLast {
		return nil, fmt.Errorf("%q: unknown type id %d", col.name, col.typ)
	}
	typ, ok, err := f.sub(3)
	if err != nil || !ok {
		return nil, errOr(err, "%q: the field has no type", col.name)
	}
	if err := checkType(col, typ); err != nil {
		return nil, fmt.Errorf("%q: %w", col.name, err)
	}
	kids, err := f.vector(5, 4)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", col.name, err)
	}
	if err := childCount(col.typ, kids.n); err != nil {
		return nil, fmt.Errorf("%q: %w", col.name, err)
	}
	for i := range kids.n {
		k, err := kids.table(i)
		if err != nil {
			return nil, fmt.Errorf("%q: child %d: %w", col.name, i, err)
		}
		kid, err := c.field(k, depth+1, l)
		if err != nil {
			return nil, fmt.Errorf("%q: child %d: %w", col.name, i, err)
		}
		col.children = append(col.children, kid)
	}
	enc, ok, err := f.sub(4)
	if err != nil {
		return nil, fmt.Errorf("%q: dictionary: %w", col.name, err)
	}
	if ok {
		if err := scalars(enc, [][2]int{{2, 1}, {3, 2}}); err != nil { // isOrdered, dictionaryKind
			return nil, err
		}
		id, err := enc.scalar(0, 8, 0)
		if err != nil {
			return nil, err
		}
		if _, ok := l.dicts[id]; ok {
			return nil, fmt.Errorf("%q: dictionary id %d is used twice", col.name, id)
		}
		if idx, ok, err := enc.sub(1); err != nil {
			return nil, err
		} else if ok {
			if err := scalars(idx, typeScalars[typeInt]); err != nil {
				return nil, err
			}
		}
		values := *col
		l.dicts[id] = &values
		col.dict = true
	}
	return col, nil
}

// typeScalars lists the (slot, size) of the scalar fields of each type's
// table that arrow-go reads (Schema.fbs).
var typeScalars = map[int64][][2]int{
	typeInt:             {{0, 4}, {1, 1}},         // bitWidth, is_signed
	typeFloatingPoint:   {{0, 2}},                 // precision
	typeDecimal:         {{0, 4}, {1, 4}, {2, 4}}, // precision, scale, bitWidth
	typeDate:            {{0, 2}},                 // unit
	typeTime:            {{0, 2}, {1, 4}},         // unit, bitWidth
	typeTimestamp:       {{0, 2}},                 // unit (timezone: a string)
	typeInterval:        {{0, 2}},                 // unit
	typeDuration:        {{0, 2}},                 // unit
	typeFixedSizeBinary: {{0, 4}},                 // byteWidth
	typeFixedSizeList:   {{0, 4}},                 // listSize
	typeMap:             {{0, 1}},                 // keysSorted
	typeUnion:           {{0, 2}},                 // mode (typeIds: a vector)
}

// scalars checks that the scalar fields of t lie within it.
func scalars(t fbTable, fields [][2]int) error {
	for _, f := range fields {
		if _, err := t.scalar(f[0], f[1], 0); err != nil {
			return err
		}
	}
	return nil
}

// checkType checks the type table of col.
func checkType(col *column, t fbTable) error {
	if err := scalars(t, typeScalars[col.typ]); err != nil {
		return err
	}
	switch col.typ {
	case typeTimestamp:
		_, err := t.str(1) // timezone
		return err
	case typeUnion:
		mode, _ := t.scalar(0, 2, 0)
		col.dense = mode == 1
		ids, err := t.vector(1, 4)
		if err == nil && ids.n > 127 {
			err = fmt.Errorf("a union has at most 127 type ids, got %d", ids.n)
		}
		return err
	}
	return nil
}

// childCount checks that a field of type typ has n children.
func childCount(typ int64, n int) error {
	want := 0
	switch typ {
	case typeStruct:
		return nil
	case typeUnion:
		if n > 127 {
			return fmt.Errorf("a union has at most 127 children, got %d", n)
		}
		return nil
	case typeList, typeLargeList, typeListView, typeLargeListView, typeFixedSizeList, typeMap:
		want = 1
	case typeRunEndEncoded:
		want = 2
	}
	if n != want {
		return fmt.Errorf("type %d must have %d children, got %d", typ, want, n)
	}
	return nil
}

// need counts what a batch must carry.
type need struct {
	nodes, buffers, views int
}

// add counts col's field nodes, fixed buffers and view columns as
// arrow-go's loader reads them (ipc/file_reader.go, loadArray), for a
// message of metadata version.
func (n *need) add(col *column, version int64) {
	n.nodes++
	if col.dict { // the indices: validity and data
		n.buffers += 2
		return
	}
	// Unions and run-end encoded arrays lost their validity buffer in V5;
	// nulls never had one.
	validity := 1
	switch col.typ {
	case typeNull:
		validity = 0
	case typeUnion, typeRunEndEncoded:
		if version >= metadataV5 {
			validity = 0
		}
	}
	n.buffers += validity
	switch col.typ {
	case typeBinary, typeUtf8, typeLargeBinary, typeLargeUtf8, typeListView, typeLargeListView:
		n.buffers += 2
	case typeBinaryView, typeUtf8View:
		n.buffers++ // the views; the data buffers are the variadic ones
		n.views++
	case typeUnion:
		n.buffers++ // type ids
		if col.dense {
			n.buffers++ // offsets
		}
	case typeNull, typeStruct, typeFixedSizeList, typeRunEndEncoded:
	default: // fixed width, lists and maps: data or offsets
		n.buffers++
	}
	for _, k := range col.children {
		n.add(k, version)
	}
}

// Batch is what CheckBatch needs besides the message.
type Batch struct {
	Body []byte
	// Unpacked bounds the decompressed size of the message's buffers.
	Unpacked int64
}

// CheckBatch checks a RecordBatch (cols) or DictionaryBatch (one column)
// header against what the schema needs and against body. It describes a
// dictionary batch: its id and whether it is a delta.
func CheckBatch(m Message, l *Layout, bc Batch) (dict Dictionary, err error) {
	rb := m.header
	cols := l.cols
	switch m.kind {
	case headerRecordBatch:
	case headerDictionaryBatch:
		dict.Is = true
		if dict.ID, err = rb.scalar(0, 8, 0); err != nil {
			return dict, err
		}
		var delta int64
		if delta, err = rb.scalar(2, 1, 0); err != nil {
			return dict, err
		}
		dict.Delta = delta != 0
		values, ok := l.dicts[dict.ID]
		if !ok {
			return dict, fmt.Errorf("dictionary id %d is not in the stream's schema", dict.ID)
		}
		cols = []*column{values}
		if rb, ok, err = rb.sub(1); err != nil || !ok {
			return dict, errOr(err, "dictionary batch %d has no data", dict.ID)
		}
	default:
		return dict, fmt.Errorf("message type %d is not a record or dictionary batch", m.kind)
	}

	maxRows := 8*int64(len(bc.Body)) + rowsSlack
	rows, err := rb.scalar(0, 8, 0)
	if err != nil {
		return dict, err
	}
	if rows < 0 || rows > maxRows {
		return dict, fmt.Errorf("the batch claims %d rows (at most %d for a body of %d bytes)", rows, maxRows, len(bc.Body))
	}

	var n need
	for _, c := range cols {
		n.add(c, m.version)
	}
	nodes, err := rb.vector(1, 16)
	if err != nil {
		return dict, err
	}
	if nodes.n != n.nodes {
		return dict, fmt.Errorf("the batch has %d field nodes, the stream's schema (%d columns) needs %d: send the stream's schema's columns, no more, no less", nodes.n, len(cols), n.nodes)
	}
	top := 0 // index of the next top-level column's node
	next := make(map[int]int, len(cols))
	for i, c := range cols {
		next[top] = i
		var sub need
		sub.add(c, m.version)
		top += sub.nodes
	}
	for i := range nodes.n {
		length, nulls := nodes.word(i, 0), nodes.word(i, 1)
		if length < 0 || length > maxRows {
			return dict, fmt.Errorf("field node %d has length %d (at most %d for a body of %d bytes)", i, length, maxRows, len(bc.Body))
		}
		if nulls < 0 || nulls > length {
			return dict, fmt.Errorf("field node %d has %d nulls for length %d", i, nulls, length)
		}
		if c, ok := next[i]; ok && length != rows {
			return dict, fmt.Errorf("column %q has %d rows, the batch %d", cols[c].name, length, rows)
		}
	}

	variadic, err := rb.vector(4, 8)
	if err != nil {
		return dict, err
	}
	if variadic.n != n.views {
		return dict, fmt.Errorf("the batch has %d variadic buffer counts, its view columns need %d", variadic.n, n.views)
	}
	buffers, err := rb.vector(2, 16)
	if err != nil {
		return dict, err
	}
	want := int64(n.buffers)
	for i := range variadic.n {
		v := variadic.word(i, 0)
		if v < 0 || v > int64(buffers.n) {
			return dict, fmt.Errorf("variadic buffer count %d is %d (the batch has %d buffers)", i, v, buffers.n)
		}
		want += v
	}
	if int64(buffers.n) != want {
		return dict, fmt.Errorf("the batch has %d buffers, the stream's schema needs %d", buffers.n, want)
	}

	codec, compressed, err := rb.sub(3)
	if err != nil {
		return dict, err
	}
	if compressed {
		kind, err := codec.scalar(0, 1, 0)
		if err != nil {
			return dict, err
		}
		method, err := codec.scalar(1, 1, 0)
		if err != nil {
			return dict, err
		}
		if (kind != 0 && kind != 1) || method != 0 {
			return dict, fmt.Errorf("compression codec %d, method %d is not supported (LZ4 frame or ZSTD, per buffer)", kind, method)
		}
	}
	var unpacked, raw int64
	for i := range buffers.n {
		off, length := buffers.word(i, 0), buffers.word(i, 1)
		if off < 0 || length < 0 || off > int64(len(bc.Body)) || length > int64(len(bc.Body))-off {
			return dict, fmt.Errorf("buffer %d (offset %d, length %d) lies outside the %d-byte body", i, off, length, len(bc.Body))
		}
		if !compressed || length == 0 {
			continue
		}
		if length < 8 {
			return dict, fmt.Errorf("compressed buffer %d has %d bytes, fewer than its 8-byte length prefix", i, length)
		}
		size := int64(binary.LittleEndian.Uint64(bc.Body[off:]))
		if size == -1 { // stored uncompressed
			size = length - 8
			raw += size
		}
		if size < 0 || size > bc.Unpacked-unpacked {
			return dict, fmt.Errorf("compressed buffers decompress to more than %d bytes (limits.max_message_bytes)", bc.Unpacked)
		}
		unpacked += size
	}
	// What the reader keeps: the body as received, or the buffers
	// decompressed, and the whole body besides when a buffer of it is
	// stored uncompressed (the reader points into it).
	dict.Size = int64(len(bc.Body))
	if compressed {
		dict.Size = unpacked
		if raw > 0 {
			dict.Size += int64(len(bc.Body)) - raw
		}
	}
	return dict, nil
}

// Dictionary describes a dictionary batch; Is is false for record batches.
type Dictionary struct {
	Is    bool
	ID    int64
	Delta bool
	// Size is what arrow-go keeps of it: its body, or its buffers
	// decompressed when compressed (a few bytes of ZSTD can stand for a
	// whole message of values), and then the body too if a buffer of it
	// is stored uncompressed (arrays point into the body).
	Size int64
}
