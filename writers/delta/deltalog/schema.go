package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Schema is a Delta table schema (Spark StructType JSON, metaData.schemaString).
type Schema struct {
	Fields []StructField
}

// StructField is one column or struct member. Metadata is kept verbatim so
// keys Quiver does not understand survive a rewrite.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]json.RawMessage
}

// DataType is a Delta type. Name is one of the primitive names (string,
// long, integer, short, byte, float, double, boolean, binary, date,
// timestamp, timestamp_ntz, variant, void), "decimal" (with Precision and
// Scale), "struct" (Fields), "array" (Element, ContainsNull) or "map" (Key,
// Value, ValueContainsNull).
type DataType struct {
	Name              string
	Precision, Scale  int
	Fields            []StructField
	Element           *DataType
	ContainsNull      bool
	Key, Value        *DataType
	ValueContainsNull bool
}

// String is the type as schemaString writes it for primitives
// ("decimal(10,2)") and the container name otherwise.
func (t DataType) String() string {
	if t.Name == "decimal" {
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	}
	return t.Name
}

var decimalRe = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$`)

// ParseSchema decodes a schemaString. Column names must be unique
// case-insensitively within each struct. Errors wrap ErrCorrupt.
func ParseSchema(schemaString string) (*Schema, error) {
	var t DataType
	if err := json.Unmarshal([]byte(schemaString), &t); err != nil {
		return nil, fmt.Errorf("delta: schemaString: %w: %w", ErrCorrupt, err)
	}
	if t.Name != "struct" {
		return nil, fmt.Errorf("delta: schemaString is a %q, want a struct: %w", t.Name, ErrCorrupt)
	}
	return &Schema{Fields: t.Fields}, nil
}

// String renders the schema as a schemaString.
func (s *Schema) String() string {
	b, err := json.Marshal(DataType{Name: "struct", Fields: s.Fields})
	if err != nil {
		// Only RawMessage metadata can fail, and it was valid when parsed.
		panic(fmt.Sprintf("delta: schema marshal: %v", err))
	}
	return string(b)
}

// Field returns the top-level column called name (exact match).
func (s *Schema) Field(name string) (StructField, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return StructField{}, false
}

// walk calls fn for every type in the tree (pre-order).
func (t *DataType) walk(fn func(*DataType)) {
	fn(t)
	for i := range t.Fields {
		t.Fields[i].Type.walk(fn)
	}
	for _, c := range []*DataType{t.Element, t.Key, t.Value} {
		if c != nil {
			c.walk(fn)
		}
	}
}

// usesType reports whether any column (at any depth) has type name.
func (s *Schema) usesType(name string) bool {
	found := false
	root := DataType{Name: "struct", Fields: s.Fields}
	root.walk(func(t *DataType) { found = found || t.Name == name })
	return found
}

type jsonField struct {
	Name     string                     `json:"name"`
	Type     DataType                   `json:"type"`
	Nullable bool                       `json:"nullable"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

type jsonComplex struct {
	Type              string      `json:"type"`
	Fields            []jsonField `json:"fields,omitempty"`
	ElementType       *DataType   `json:"elementType,omitempty"`
	ContainsNull      *bool       `json:"containsNull,omitempty"`
	KeyType           *DataType   `json:"keyType,omitempty"`
	ValueType         *DataType   `json:"valueType,omitempty"`
	ValueContainsNull *bool       `json:"valueContainsNull,omitempty"`
}

// MarshalJSON writes Spark's StructType JSON.
func (t DataType) MarshalJSON() ([]byte, error) {
	switch t.Name {
	case "struct":
		c := jsonComplex{Type: "struct", Fields: make([]jsonField, len(t.Fields))}
		for i, f := range t.Fields {
			md := f.Metadata
			if md == nil {
				md = map[string]json.RawMessage{}
			}
			c.Fields[i] = jsonField{Name: f.Name, Type: f.Type, Nullable: f.Nullable, Metadata: md}
		}
		if len(c.Fields) == 0 {
			return []byte(`{"type":"struct","fields":[]}`), nil
		}
		return json.Marshal(c)
	case "array":
		return json.Marshal(jsonComplex{Type: "array", ElementType: t.Element, ContainsNull: &t.ContainsNull})
	case "map":
		return json.Marshal(jsonComplex{Type: "map", KeyType: t.Key, ValueType: t.Value, ValueContainsNull: &t.ValueContainsNull})
	}
	return json.Marshal(t.String())
}

// UnmarshalJSON reads Spark's StructType JSON; decimal(p, s) is parsed
// tolerantly (spaces allowed).
func (t *DataType) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return err
		}
		name = strings.TrimSpace(name)
		if m := decimalRe.FindStringSubmatch(name); m != nil {
			p, _ := strconv.Atoi(m[1])
			s, _ := strconv.Atoi(m[2])
			if p < 1 || p > 38 || s < 0 || s > p {
				return fmt.Errorf("decimal(%d,%d): precision must be 1..38 and scale 0..precision", p, s)
			}
			*t = DataType{Name: "decimal", Precision: p, Scale: s}
			return nil
		}
		*t = DataType{Name: name}
		return nil
	}
	var c jsonComplex
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	switch c.Type {
	case "struct":
		*t = DataType{Name: "struct", Fields: make([]StructField, len(c.Fields))}
		seen := make(map[string]bool, len(c.Fields))
		for i, f := range c.Fields {
			lower := strings.ToLower(f.Name)
			if seen[lower] {
				return fmt.Errorf("duplicate column name %q (names are case-insensitive)", f.Name)
			}
			seen[lower] = true
			t.Fields[i] = StructField(f)
		}
	case "array":
		if c.ElementType == nil {
			return fmt.Errorf("array without elementType")
		}
		*t = DataType{Name: "array", Element: c.ElementType, ContainsNull: c.ContainsNull == nil || *c.ContainsNull}
	case "map":
		if c.KeyType == nil || c.ValueType == nil {
			return fmt.Errorf("map without keyType or valueType")
		}
		*t = DataType{Name: "map", Key: c.KeyType, Value: c.ValueType, ValueContainsNull: c.ValueContainsNull == nil || *c.ValueContainsNull}
	default:
		return fmt.Errorf("unknown complex type %q", c.Type)
	}
	return nil
}
