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
	ti := typeOf(t)
	switch ti.kind {
	case kindNull:
		return "null", nil
	case kindBool:
		return "boolean", nil
	case kindInt:
		if ti.bits <= 32 {
			return "int", nil
		}
		return "long", nil
	case kindUint64, kindDuration:
		return "long", nil
	case kindFloat:
		if ti.bits == 32 {
			return "float", nil
		}
		return "double", nil
	case kindString:
		return "string", nil
	case kindBinary:
		return "bytes", nil
	case kindFixedBinary:
		return map[string]any{"type": "fixed", "name": d.unique(name), "size": ti.width}, nil
	case kindDate:
		return logical("int", "date"), nil
	case kindTimestamp:
		switch ti.unit {
		case arrow.Second, arrow.Millisecond:
			return logical("long", "timestamp-millis"), nil
		case arrow.Microsecond:
			return logical("long", "timestamp-micros"), nil
		default:
			return logical("long", "timestamp-nanos"), nil
		}
	case kindTime:
		if ti.bits == 32 {
			return logical("int", "time-millis"), nil
		}
		return logical("long", "time-micros"), nil
	case kindDecimal:
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": ti.precision, "scale": ti.scale}, nil
	case kindStruct:
		return d.record(name, path, t.(*arrow.StructType).Fields())
	case kindMap:
		m := t.(*arrow.MapType)
		if typeOf(m.KeyType()).kind != kindString {
			return nil, fmt.Errorf("kafkaenc: column %q: avro maps need string keys, not %s", path, m.KeyType())
		}
		values, err := d.typ(name+"_value", path+".value", m.ItemType(), m.ItemField().Nullable)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "map", "values": values}, nil
	case kindList:
		elem := t.(arrow.ListLikeType).ElemField()
		items, err := d.typ(name+"_item", path+".item", elem.Type, elem.Nullable)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case kindDictionary:
		return d.base(name, path, t.(*arrow.DictionaryType).ValueType)
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
