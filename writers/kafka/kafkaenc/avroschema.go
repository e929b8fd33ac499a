package kafkaenc

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hamba/avro/v2"
)

// AvroSchema derives the Avro schema of records of schema, a record named
// name (sanitized to an Avro name). Nullable columns become ["null", T]
// unions defaulting to null. The mapping is in docs/kafka.md; a type Avro
// cannot carry (maps with non-string keys, unions, float16, intervals) is
// an error naming the column. The text is validated with hamba/avro.
func AvroSchema(schema *arrow.Schema, name string) (string, error) {
	d := &deriver{names: map[string]bool{}}
	root, err := d.record(avroName(name), "", schema.Fields())
	if err != nil {
		return "", err
	}
	text, err := json.Marshal(root)
	if err != nil {
		return "", fmt.Errorf("kafkaenc: avro schema: %w", err)
	}
	if _, err := avro.ParseBytes(text); err != nil {
		return "", fmt.Errorf("kafkaenc: derived avro schema is invalid: %w", err)
	}
	return string(text), nil
}

// deriver builds schema JSON and keeps named types unique.
type deriver struct {
	names map[string]bool // named types (records, fixed) already defined
}

func (d *deriver) unique(name string) string {
	n := name
	for i := 2; d.names[n]; i++ {
		n = fmt.Sprintf("%s_%d", name, i)
	}
	d.names[n] = true
	return n
}

func (d *deriver) record(name, path string, fields []arrow.Field) (map[string]any, error) {
	out := make([]any, 0, len(fields))
	seen := map[string]string{}
	for _, f := range fields {
		fp := joinPath(path, f.Name)
		an := avroName(f.Name)
		if prev, dup := seen[an]; dup {
			return nil, fmt.Errorf("kafkaenc: columns %q and %q both become the avro field %q: rename one", prev, fp, an)
		}
		seen[an] = fp
		t, err := d.typ(name+"_"+an, fp, f.Type, f.Nullable)
		if err != nil {
			return nil, err
		}
		field := map[string]any{"name": an, "type": t}
		if f.Nullable {
			field["default"] = nil
		}
		out = append(out, field)
	}
	return map[string]any{"type": "record", "name": d.unique(name), "fields": out}, nil
}

// typ returns the Avro type of t, wrapped in a null union when nullable.
func (d *deriver) typ(name, path string, t arrow.DataType, nullable bool) (any, error) {
	base, err := d.base(name, path, t)
	if err != nil || !nullable || base == "null" {
		return base, err
	}
	return []any{"null", base}, nil
}

func logical(typ, lt string) map[string]any { return map[string]any{"type": typ, "logicalType": lt} }

func (d *deriver) base(name, path string, t arrow.DataType) (any, error) {
	switch t := t.(type) {
	case *arrow.NullType:
		return "null", nil
	case *arrow.BooleanType:
		return "boolean", nil
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Uint8Type, *arrow.Uint16Type:
		return "int", nil
	case *arrow.Int64Type, *arrow.Uint32Type, *arrow.Uint64Type, *arrow.DurationType:
		return "long", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "string", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return "bytes", nil
	case *arrow.FixedSizeBinaryType:
		return map[string]any{"type": "fixed", "name": d.unique(name), "size": t.ByteWidth}, nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return logical("int", "date"), nil
	case *arrow.TimestampType:
		switch t.Unit {
		case arrow.Second, arrow.Millisecond:
			return logical("long", "timestamp-millis"), nil
		case arrow.Microsecond:
			return logical("long", "timestamp-micros"), nil
		default:
			return logical("long", "timestamp-nanos"), nil
		}
	case *arrow.Time32Type:
		return logical("int", "time-millis"), nil
	case *arrow.Time64Type:
		return logical("long", "time-micros"), nil
	case *arrow.Decimal128Type:
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": t.Precision, "scale": t.Scale}, nil
	case *arrow.Decimal256Type:
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": t.Precision, "scale": t.Scale}, nil
	case *arrow.StructType:
		return d.record(name, path, t.Fields())
	case *arrow.MapType:
		switch t.KeyType().ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		default:
			return nil, fmt.Errorf("kafkaenc: column %q: avro maps need string keys, not %s", path, t.KeyType())
		}
		values, err := d.typ(name+"_value", path+".value", t.ItemType(), t.ItemField().Nullable)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "map", "values": values}, nil
	case arrow.ListLikeType:
		elem := t.ElemField()
		items, err := d.typ(name+"_item", path+".item", elem.Type, elem.Nullable)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case *arrow.DictionaryType:
		return d.base(name, path, t.ValueType)
	}
	return nil, unsupported("avro", path, t)
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// avroName maps s to an Avro name ([A-Za-z_][A-Za-z0-9_]*): every other
// character becomes '_', and a leading digit gets a '_' prefix.
func avroName(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
