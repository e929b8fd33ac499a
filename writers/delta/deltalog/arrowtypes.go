package deltalog

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// FromArrow maps an Arrow schema to a Delta schema: int8/16/32/64 → byte,
// short, integer, long; float32/64 → float, double; bool → boolean;
// utf8/large_utf8 (and dictionaries of them) → string; binary/large_binary
// → binary; date32 → date; timestamp with a zone (any unit) → timestamp;
// timestamp without a zone → timestamp_ntz; decimal128(p,s) → decimal(p,s);
// struct, list/large_list (→ array) and map recursively. Arrow nullability
// becomes nullable/containsNull/valueContainsNull. Any other type is refused
// with an error wrapping writers.ErrInvalid that names the column.
func FromArrow(s *arrow.Schema) (*Schema, error) {
	fields, err := fieldsFromArrow(s.Fields(), "")
	if err != nil {
		return nil, err
	}
	return &Schema{Fields: fields}, nil
}

func fieldsFromArrow(in []arrow.Field, parent string) ([]StructField, error) {
	out := make([]StructField, len(in))
	seen := make(map[string]bool, len(in))
	for i, f := range in {
		path := parent + f.Name
		lower := strings.ToLower(f.Name)
		if seen[lower] {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: column %q: duplicate name (Delta column names are case-insensitive); rename one", path)
		}
		seen[lower] = true
		t, err := typeFromArrow(f.Type, path)
		if err != nil {
			return nil, err
		}
		out[i] = StructField{Name: f.Name, Type: t, Nullable: f.Nullable}
	}
	return out, nil
}

func typeFromArrow(t arrow.DataType, path string) (DataType, error) {
	switch t := t.(type) {
	case *arrow.Int8Type:
		return DataType{Name: "byte"}, nil
	case *arrow.Int16Type:
		return DataType{Name: "short"}, nil
	case *arrow.Int32Type:
		return DataType{Name: "integer"}, nil
	case *arrow.Int64Type:
		return DataType{Name: "long"}, nil
	case *arrow.Float32Type:
		return DataType{Name: "float"}, nil
	case *arrow.Float64Type:
		return DataType{Name: "double"}, nil
	case *arrow.BooleanType:
		return DataType{Name: "boolean"}, nil
	case *arrow.StringType, *arrow.LargeStringType:
		return DataType{Name: "string"}, nil
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return DataType{Name: "binary"}, nil
	case *arrow.Date32Type:
		return DataType{Name: "date"}, nil
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return DataType{Name: "timestamp_ntz"}, nil
		}
		return DataType{Name: "timestamp"}, nil
	case *arrow.Decimal128Type:
		if t.Scale < 0 || t.Precision < 1 || t.Precision > 38 {
			return DataType{}, writers.Errorf(writers.ErrInvalid, "delta: column %q: %s is not a Delta decimal (precision 1..38, scale ≥ 0); cast it", path, t)
		}
		return DataType{Name: "decimal", Precision: int(t.Precision), Scale: int(t.Scale)}, nil
	case *arrow.DictionaryType:
		return typeFromArrow(t.ValueType, path)
	case *arrow.StructType:
		fields, err := fieldsFromArrow(t.Fields(), path+".")
		if err != nil {
			return DataType{}, err
		}
		return DataType{Name: "struct", Fields: fields}, nil
	case *arrow.ListType:
		return arrayFromArrow(t.ElemField(), path)
	case *arrow.LargeListType:
		return arrayFromArrow(t.ElemField(), path)
	case *arrow.MapType:
		k, err := typeFromArrow(t.KeyType(), path+".key")
		if err != nil {
			return DataType{}, err
		}
		v, err := typeFromArrow(t.ItemType(), path+".value")
		if err != nil {
			return DataType{}, err
		}
		return DataType{Name: "map", Key: &k, Value: &v, ValueContainsNull: t.ItemField().Nullable}, nil
	}
	return DataType{}, writers.Errorf(writers.ErrInvalid, "delta: column %q: Arrow type %s has no Delta equivalent; cast it to a supported type", path, t)
}

func arrayFromArrow(elem arrow.Field, path string) (DataType, error) {
	e, err := typeFromArrow(elem.Type, path+".element")
	if err != nil {
		return DataType{}, err
	}
	return DataType{Name: "array", Element: &e, ContainsNull: elem.Nullable}, nil
}

// ToArrow maps a Delta schema to Arrow: timestamp → timestamp[us, UTC],
// timestamp_ntz → timestamp[us], array → list, void → null; the rest as in
// FromArrow. variant and unknown types are refused with ErrUnsupported.
func (s *Schema) ToArrow() (*arrow.Schema, error) {
	fields, err := fieldsToArrow(s.Fields, "")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func fieldsToArrow(in []StructField, parent string) ([]arrow.Field, error) {
	out := make([]arrow.Field, len(in))
	for i, f := range in {
		t, err := f.Type.toArrow(parent + f.Name)
		if err != nil {
			return nil, err
		}
		out[i] = arrow.Field{Name: f.Name, Type: t, Nullable: f.Nullable}
	}
	return out, nil
}

func (t DataType) toArrow(path string) (arrow.DataType, error) {
	switch t.Name {
	case "byte":
		return arrow.PrimitiveTypes.Int8, nil
	case "short":
		return arrow.PrimitiveTypes.Int16, nil
	case "integer":
		return arrow.PrimitiveTypes.Int32, nil
	case "long":
		return arrow.PrimitiveTypes.Int64, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil
	case "boolean":
		return arrow.FixedWidthTypes.Boolean, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil
	case "timestamp":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "timestamp_ntz":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case "void":
		return arrow.Null, nil
	case "decimal":
		return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}, nil
	case "struct":
		fields, err := fieldsToArrow(t.Fields, path+".")
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fields...), nil
	case "array":
		e, err := t.Element.toArrow(path + ".element")
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: e, Nullable: t.ContainsNull}), nil
	case "map":
		k, err := t.Key.toArrow(path + ".key")
		if err != nil {
			return nil, err
		}
		v, err := t.Value.toArrow(path + ".value")
		if err != nil {
			return nil, err
		}
		return arrow.MapOfFields(arrow.Field{Name: "key", Type: k}, arrow.Field{Name: "value", Type: v, Nullable: t.ValueContainsNull}), nil
	}
	return nil, fmt.Errorf("delta: column %q: type %q cannot be read: %w", path, t.Name, ErrUnsupported)
}
