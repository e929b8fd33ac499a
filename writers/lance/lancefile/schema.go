package lancefile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/filepb"
)

// Field is one lance.file.Field: a column or a nested child, listed flat in
// pre-order (parents before children).
type Field struct {
	Name        string
	ID          int32
	ParentID    int32 // -1 for top-level fields
	LogicalType string
	Nullable    bool
	// Encoding is the legacy encoding hint LanceDB still writes (PLAIN=1,
	// VAR_BINARY=2, DICTIONARY=3); kept for compatibility, ignored by
	// readers.
	Encoding uint64
	Metadata map[string][]byte
	pb       *filepb.Field // decoded from: what Quiver does not model is carried through
}

// Legacy encoding hints (lance.file.Encoding).
const (
	encodingPlain      = 1
	encodingVarBinary  = 2
	encodingDictionary = 3
)

// Schema is a Lance schema: fields in pre-order plus schema metadata.
type Schema struct {
	Fields   []Field
	Metadata map[string][]byte
}

func (f *Field) toPB() *filepb.Field {
	m := CloneOr(f.pb)
	m.Name, m.Id, m.ParentId = f.Name, f.ID, f.ParentID
	m.LogicalType, m.Nullable = f.LogicalType, f.Nullable
	//lint:ignore SA1019 manifests still carry the V1 encoding hint: pylance writes and reads it
	m.Encoding = filepb.Encoding(f.Encoding)
	m.Metadata = f.Metadata
	return m
}

func fieldOf(m *filepb.Field) Field {
	return Field{Name: m.Name, ID: m.Id, ParentID: m.ParentId, LogicalType: m.LogicalType, Nullable: m.Nullable,
		//lint:ignore SA1019 manifests still carry the V1 encoding hint: pylance writes and reads it
		Encoding: uint64(m.Encoding), Metadata: m.Metadata, pb: m}
}

// ToPB returns the fields as messages.
func (s *Schema) ToPB() []*filepb.Field {
	out := make([]*filepb.Field, len(s.Fields))
	for i := range s.Fields {
		out[i] = s.Fields[i].toPB()
	}
	return out
}

// maxSchemaDepth bounds how deep the fields of a schema nest.
const maxSchemaDepth = 128

// SchemaOf is the schema of decoded fields and metadata, which another
// process wrote: field ids are unique, and every parent is a field of the
// schema, at most maxSchemaDepth levels up (no cycle: the schema's
// readers recurse along parents). Else it is ErrInvalid. Lance gives
// some nested fields of its own id -1 (blob v2's); such a field cannot
// have children (they would be the top-level fields).
func SchemaOf(fields []*filepb.Field, metadata map[string][]byte) (Schema, error) {
	s := Schema{Fields: make([]Field, len(fields)), Metadata: metadata}
	parent := make(map[int32]int32, len(fields))
	for i, f := range fields {
		s.Fields[i] = fieldOf(f)
		if f.Id < 0 {
			if hasChildren(f.LogicalType) {
				return Schema{}, writers.Errorf(writers.ErrInvalid, "lance: schema field %q of type %s has id %d: its children cannot be told from the top-level fields", f.Name, f.LogicalType, f.Id)
			}
			continue
		}
		if _, dup := parent[f.Id]; dup {
			return Schema{}, writers.Errorf(writers.ErrInvalid, "lance: schema fields share id %d (%q)", f.Id, f.Name)
		}
		parent[f.Id] = f.ParentId
	}
	for _, f := range s.Fields {
		depth := 0
		for p := f.ParentID; p != -1; p = parent[p] {
			if _, ok := parent[p]; !ok {
				return Schema{}, writers.Errorf(writers.ErrInvalid, "lance: schema field %q (id %d) names parent %d, which is no field", f.Name, f.ID, p)
			}
			if depth++; depth > maxSchemaDepth {
				return Schema{}, writers.Errorf(writers.ErrInvalid, "lance: schema field %q (id %d) nests deeper than %d levels, or its parents form a cycle", f.Name, f.ID, maxSchemaDepth)
			}
		}
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// MaxID returns the highest field id, or -1 for an empty schema.
func (s *Schema) MaxID() int32 {
	m := int32(-1)
	for _, f := range s.Fields {
		m = max(m, f.ID)
	}
	return m
}

// TopLevel returns the top-level fields in order.
func (s *Schema) TopLevel() []Field {
	var out []Field
	for _, f := range s.Fields {
		if f.ParentID == -1 {
			out = append(out, f)
		}
	}
	return out
}

// children returns the direct children of id in order.
func (s *Schema) children(id int32) []Field {
	var out []Field
	for _, f := range s.Fields {
		if f.ParentID == id {
			out = append(out, f)
		}
	}
	return out
}

// Subtree returns field id and its descendants in pre-order.
func (s *Schema) Subtree(id int32) []Field {
	var out []Field
	for _, f := range s.Fields {
		if f.ID == id {
			out = append(out, f)
		}
	}
	for _, c := range s.children(id) {
		out = append(out, s.Subtree(c.ID)...)
	}
	return out
}

// Equal reports whether two schemas have the same fields (names, ids,
// parents, types, nullability); metadata is ignored.
func (s *Schema) Equal(o *Schema) bool {
	return slices.EqualFunc(s.Fields, o.Fields, func(a, b Field) bool {
		return a.Name == b.Name && a.ID == b.ID && a.ParentID == b.ParentID &&
			a.LogicalType == b.LogicalType && a.Nullable == b.Nullable
	})
}

// FromArrow converts an Arrow schema into a Lance schema with field ids
// assigned depth-first in pre-order from 0, as Lance does at creation.
// Arrow types without a Lance 2.0 mapping are ErrInvalid.
func FromArrow(s *arrow.Schema) (*Schema, error) {
	out := &Schema{Metadata: arrowMeta(s.Metadata())}
	next := int32(0)
	var add func(af arrow.Field, parent int32, path string) error
	add = func(af arrow.Field, parent int32, path string) error {
		lt, err := logicalType(af.Type, parent < 0)
		if err != nil {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q: %w", path, err)
		}
		f := Field{Name: af.Name, ID: next, ParentID: parent, LogicalType: lt, Nullable: af.Nullable,
			Encoding: encodingPlain, Metadata: arrowMeta(af.Metadata)}
		switch af.Type.ID() {
		case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
			f.Encoding = encodingVarBinary
		case arrow.DICTIONARY: // as pylance records it: the hint and an empty dictionary
			f.Encoding = encodingDictionary
			//lint:ignore SA1019 pylance records a dictionary column this way in manifests
			f.pb = &filepb.Field{Dictionary: &filepb.Dictionary{}}
		}
		next++
		out.Fields = append(out.Fields, f)
		switch t := af.Type.(type) {
		case *arrow.ListType:
			return add(t.ElemField(), f.ID, path+"."+t.ElemField().Name)
		case *arrow.LargeListType:
			return add(t.ElemField(), f.ID, path+"."+t.ElemField().Name)
		case *arrow.MapType: // Lance's map: one child, the entries struct
			return add(t.ElemField(), f.ID, path+"."+t.ElemField().Name)
		case *arrow.StructType:
			for _, c := range t.Fields() {
				if err := add(c, f.ID, path+"."+c.Name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, af := range s.Fields() {
		if err := add(af, -1, af.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func arrowMeta(m arrow.Metadata) map[string][]byte {
	if m.Len() == 0 {
		return nil
	}
	out := make(map[string][]byte, m.Len())
	for i, k := range m.Keys() {
		out[k] = []byte(m.Values()[i])
	}
	return out
}

func toArrowMeta(m map[string][]byte) arrow.Metadata {
	if len(m) == 0 {
		return arrow.Metadata{}
	}
	keys := sortedKeys(m)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = string(m[k])
	}
	return arrow.NewMetadata(keys, vals)
}

// ToArrow converts the schema to Arrow. Unknown logical types are
// ErrInvalid naming the column.
func (s *Schema) ToArrow() (*arrow.Schema, error) {
	top := s.TopLevel()
	fields := make([]arrow.Field, len(top))
	for i, f := range top {
		af, err := s.arrowField(f)
		if err != nil {
			return nil, err
		}
		fields[i] = af
	}
	return arrow.NewSchema(fields, ptrMeta(toArrowMeta(s.Metadata))), nil
}

func ptrMeta(m arrow.Metadata) *arrow.Metadata {
	if m.Len() == 0 {
		return nil
	}
	return &m
}

// hasChildren reports the logical types whose fields have child fields.
func hasChildren(logicalType string) bool {
	switch logicalType {
	case "list", "large_list", "struct", "map":
		return true
	}
	return false
}

func (s *Schema) arrowField(f Field) (arrow.Field, error) {
	af := arrow.Field{Name: f.Name, Nullable: f.Nullable, Metadata: toArrowMeta(f.Metadata)}
	switch {
	case hasChildren(f.LogicalType):
		kids := s.children(f.ID)
		conv := make([]arrow.Field, len(kids))
		for i, k := range kids {
			c, err := s.arrowField(k)
			if err != nil {
				return af, err
			}
			conv[i] = c
		}
		if f.LogicalType == "struct" {
			af.Type = arrow.StructOf(conv...)
			return af, nil
		}
		if len(conv) != 1 {
			return af, writers.Errorf(writers.ErrInvalid, "lance: list column %q has %d child fields, want 1", f.Name, len(conv))
		}
		if f.LogicalType == "map" {
			st, ok := conv[0].Type.(*arrow.StructType)
			if !ok || st.NumFields() != 2 || st.Field(0).Nullable {
				return af, writers.Errorf(writers.ErrInvalid, "lance: map column %q has entries of type %s, want a struct of a non-null key and a value", f.Name, conv[0].Type)
			}
			af.Type = arrow.MapOfFields(st.Field(0), st.Field(1))
			return af, nil
		}
		af.Type = arrow.ListOfField(conv[0])
		if f.LogicalType == "large_list" {
			af.Type = arrow.LargeListOfField(conv[0])
		}
		return af, nil
	}
	t, err := parseLogicalType(f.LogicalType)
	if err != nil {
		return af, writers.Errorf(writers.ErrInvalid, "lance: column %q: %w", f.Name, err)
	}
	af.Type = t
	return af, nil
}

var primitiveTypes = map[string]arrow.DataType{
	"bool":         arrow.FixedWidthTypes.Boolean,
	"int8":         arrow.PrimitiveTypes.Int8,
	"int16":        arrow.PrimitiveTypes.Int16,
	"int32":        arrow.PrimitiveTypes.Int32,
	"int64":        arrow.PrimitiveTypes.Int64,
	"uint8":        arrow.PrimitiveTypes.Uint8,
	"uint16":       arrow.PrimitiveTypes.Uint16,
	"uint32":       arrow.PrimitiveTypes.Uint32,
	"uint64":       arrow.PrimitiveTypes.Uint64,
	"float":        arrow.PrimitiveTypes.Float32,
	"double":       arrow.PrimitiveTypes.Float64,
	"string":       arrow.BinaryTypes.String,
	"large_string": arrow.BinaryTypes.LargeString,
	"binary":       arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary,
	"date32:day":   arrow.FixedWidthTypes.Date32,
}

// logicalType returns Lance's logical type string for an Arrow type that
// Quiver can write in format 2.0.
// A dictionary is a top-level column's type only (top): Lance keeps one
// per page of a column, not of a nested field.
func logicalType(t arrow.DataType, top bool) (string, error) {
	for name, p := range primitiveTypes {
		if arrow.TypeEqual(p, t) {
			return name, nil
		}
	}
	for name, p := range newerTypes {
		if arrow.TypeEqual(p, t) {
			return name, nil
		}
	}
	switch t := t.(type) {
	case *arrow.DurationType:
		return "duration:" + t.Unit.String(), nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal:128:%d:%d", t.Precision, t.Scale), nil
	case *arrow.Decimal256Type:
		return fmt.Sprintf("decimal:256:%d:%d", t.Precision, t.Scale), nil
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return "timestamp:" + t.Unit.String() + ":" + tz, nil
	case *arrow.FixedSizeListType:
		if !isFixedWidth(t.Elem()) || t.Elem().ID() == arrow.BOOL {
			return "", fmt.Errorf("fixed_size_list of %s is not supported: use fixed_size_list of a fixed-width number", t.Elem())
		}
		item, err := logicalType(t.Elem(), false)
		if err != nil {
			return "", err
		}
		return "fixed_size_list:" + item + ":" + strconv.Itoa(int(t.Len())), nil
	case *arrow.DictionaryType:
		if !top {
			return "", fmt.Errorf("a dictionary inside a struct, list or fixed_size_list is not supported: decode it to its value type")
		}
		// pandas categoricals: Lance's "dict:<values>:<indices>:<ordered>".
		v, verr := logicalType(t.ValueType, false)
		k, kerr := logicalType(t.IndexType, false)
		if verr != nil || kerr != nil || !arrow.IsInteger(t.IndexType.ID()) || !isPrimitive(t.ValueType) {
			return "", fmt.Errorf("dictionary of %s indexed by %s is not supported: use a dictionary of strings or numbers", t.ValueType, t.IndexType)
		}
		return fmt.Sprintf("dict:%s:%s:%t", v, k, t.Ordered), nil
	case *arrow.ListType:
		return "list", nil
	case *arrow.LargeListType:
		return "large_list", nil
	case *arrow.MapType:
		if t.KeysSorted {
			return "", fmt.Errorf("maps with sorted keys are not supported")
		}
		return "map", nil
	case *arrow.StructType:
		return "struct", nil
	}
	return "", fmt.Errorf("type %s has no Lance 2.0 mapping in Quiver: use a supported type (integers, floats, bool, utf8, binary, date32, timestamp, fixed_size_list, list, struct)", t)
}

// newerTypes are fixed-width logical types Quiver writes in Lance file
// formats 2.1 and 2.2 only (CheckFormatTypes refuses them for 2.0); the
// reader takes them from any format.
var newerTypes = map[string]arrow.DataType{
	"halffloat": arrow.FixedWidthTypes.Float16,
	"date64:ms": arrow.FixedWidthTypes.Date64,
	"time32:s":  arrow.FixedWidthTypes.Time32s,
	"time32:ms": arrow.FixedWidthTypes.Time32ms,
	"time64:us": arrow.FixedWidthTypes.Time64us,
	"time64:ns": arrow.FixedWidthTypes.Time64ns,
}

var timeUnits = map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}

// parseLogicalType is the inverse of logicalType for non-nested types.
func parseLogicalType(s string) (arrow.DataType, error) {
	if t, ok := primitiveTypes[s]; ok {
		return t, nil
	}
	if t, ok := newerTypes[s]; ok {
		return t, nil
	}
	parts := strings.Split(s, ":")
	switch {
	case parts[0] == "duration" && len(parts) == 2:
		if u, ok := timeUnits[parts[1]]; ok {
			return &arrow.DurationType{Unit: u}, nil
		}
	case parts[0] == "decimal" && len(parts) == 4:
		p, perr := strconv.ParseInt(parts[2], 10, 32)
		sc, serr := strconv.ParseInt(parts[3], 10, 32)
		if perr == nil && serr == nil {
			switch parts[1] {
			case "128":
				return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(sc)}, nil
			case "256":
				return &arrow.Decimal256Type{Precision: int32(p), Scale: int32(sc)}, nil
			}
		}
	case parts[0] == "dict" && len(parts) == 4:
		v, verr := parseLogicalType(parts[1])
		k, kerr := parseLogicalType(parts[2])
		if verr == nil && kerr == nil && arrow.IsInteger(k.ID()) {
			return &arrow.DictionaryType{IndexType: k, ValueType: v, Ordered: parts[3] == "true"}, nil
		}
	}
	switch {
	case strings.HasPrefix(s, "timestamp:"):
		parts := strings.SplitN(s, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("bad logical type %q", s)
		}
		u, ok := timeUnits[parts[1]]
		if !ok {
			return nil, fmt.Errorf("bad timestamp unit in %q", s)
		}
		tz := parts[2]
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	case strings.HasPrefix(s, "fixed_size_list:"):
		rest := s[len("fixed_size_list:"):]
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return nil, fmt.Errorf("bad logical type %q", s)
		}
		dim, err := strconv.ParseInt(rest[i+1:], 10, 32)
		item, ierr := parseLogicalType(rest[:i])
		if err != nil || ierr != nil || dim <= 0 {
			return nil, fmt.Errorf("bad logical type %q", s)
		}
		return arrow.FixedSizeListOf(int32(dim), item), nil
	}
	return nil, fmt.Errorf("logical type %q is not supported by Quiver", s)
}

// isPrimitive reports types that are neither nested nor dictionaries.
func isPrimitive(t arrow.DataType) bool {
	switch t.(type) {
	case arrow.NestedType, *arrow.DictionaryType:
		return false
	}
	return true
}

func isFixedWidth(t arrow.DataType) bool {
	_, ok := t.(arrow.FixedWidthDataType)
	return ok
}
