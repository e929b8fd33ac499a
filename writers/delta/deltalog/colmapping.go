package deltalog

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/google/uuid"
)

// Column mapping (the protocol's "Column Mapping"): in name and id mode
// every field, at every depth, carries a physical name and an id in its
// metadata; data files, statistics and partitionValues use the physical
// names, so renaming or dropping a column only edits the schema.
const (
	ColumnMappingModeKey  = "delta.columnMapping.mode"
	ColumnMappingMaxIDKey = "delta.columnMapping.maxColumnId"
	PhysicalNameKey       = "delta.columnMapping.physicalName"
	ColumnIDKey           = "delta.columnMapping.id"
)

// ColumnMappingMode returns the table's column mapping mode: "none"
// (also when unset), "name" or "id"; anything else is returned as is (and
// refused by CheckReadable).
func ColumnMappingMode(conf map[string]string) string {
	if m := conf[ColumnMappingModeKey]; m != "" {
		return m
	}
	return "none"
}

// PhysicalName returns the field's delta.columnMapping.physicalName, or
// its name when it has none (column mapping off).
func (f StructField) PhysicalName() string {
	var s string
	if raw, ok := f.Metadata[PhysicalNameKey]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	return f.Name
}

// ColumnID returns the field's delta.columnMapping.id.
func (f StructField) ColumnID() (int64, bool) {
	raw, ok := f.Metadata[ColumnIDKey]
	if !ok {
		return 0, false
	}
	var id int64
	if json.Unmarshal(raw, &id) != nil {
		return 0, false
	}
	return id, true
}

// MaxColumnID returns the table's delta.columnMapping.maxColumnId (0 when
// unset or malformed: checkColumnMapping refuses the latter).
func MaxColumnID(conf map[string]string) int64 {
	n, _ := strconv.ParseInt(conf[ColumnMappingMaxIDKey], 10, 64)
	return n
}

// maxFieldID is the highest column id a table's files can carry: Parquet
// field ids are 32-bit.
const maxFieldID = math.MaxInt32

// AssignColumnMapping gives every field of s (at any depth, inside arrays
// and maps too) that has no column mapping metadata the next id after
// maxID and a physical name col-<uuid>, as Spark does for a new column,
// and returns the new highest id. Fields named in prev (top-level, with
// metadata) take prev's metadata instead, so that the batches of one
// stream agree on the physical names of the columns they add. Ids past
// 2^31-1 (Parquet field ids are 32-bit) are ErrUnsupported.
func AssignColumnMapping(s *Schema, prev *Schema, maxID int64) (int64, error) {
	for i := range s.Fields {
		f := &s.Fields[i]
		if _, ok := f.ColumnID(); ok {
			continue
		}
		if prev != nil {
			if p, ok := prev.Field(f.Name); ok {
				if _, has := p.ColumnID(); has {
					*f = p
					continue
				}
			}
		}
		maxID = assignField(f, maxID)
	}
	if maxID > maxFieldID {
		return 0, fmt.Errorf("delta: the new columns would take column mapping ids up to %d, past %d (Parquet field ids are 32-bit): %w", maxID, maxFieldID, ErrUnsupported)
	}
	return maxID, nil
}

// assignField assigns f and its nested fields; past maxFieldID the ids
// stop growing (AssignColumnMapping refuses them), so they never wrap.
func assignField(f *StructField, maxID int64) int64 {
	if _, ok := f.ColumnID(); !ok {
		maxID = min(maxID, maxFieldID) + 1
		md := make(map[string]json.RawMessage, len(f.Metadata)+2)
		for k, v := range f.Metadata {
			md[k] = v
		}
		md[ColumnIDKey] = json.RawMessage(strconv.FormatInt(maxID, 10))
		name, _ := json.Marshal("col-" + uuid.NewString())
		md[PhysicalNameKey] = name
		f.Metadata = md
	}
	return assignType(&f.Type, maxID)
}

func assignType(t *DataType, maxID int64) int64 {
	for i := range t.Fields {
		maxID = assignField(&t.Fields[i], maxID)
	}
	for _, c := range []*DataType{t.Element, t.Key, t.Value} {
		if c != nil {
			maxID = assignType(c, maxID)
		}
	}
	return maxID
}

// checkColumnMapping reports whether a column-mapped table's schema is
// complete: every field at any depth has a physical name and an id no
// higher than maxColumnId, physical names unique within each struct and
// ids unique in the table. Errors wrap ErrCorrupt.
func checkColumnMapping(s *Snapshot) error {
	conf := s.Metadata.Configuration
	if raw := conf[ColumnMappingMaxIDKey]; raw != "" {
		if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
			return fmt.Errorf("delta: %s = %q is not an integer: %w", ColumnMappingMaxIDKey, raw, ErrCorrupt)
		}
	}
	schema, err := s.Metadata.Schema()
	if err != nil {
		return err
	}
	return CheckColumnMapping(schema, MaxColumnID(conf))
}

// CheckColumnMapping checks the column mapping metadata of schema against
// the table's maxColumnId (see checkColumnMapping).
func CheckColumnMapping(schema *Schema, maxID int64) error {
	ids := make(map[int64]string)
	var check func(fields []StructField, parent string) error
	var checkType func(t DataType, path string) error
	check = func(fields []StructField, parent string) error {
		names := make(map[string]bool, len(fields))
		for _, f := range fields {
			path := parent + f.Name
			phys := f.PhysicalName()
			id, ok := f.ColumnID()
			var named string
			if raw := f.Metadata[PhysicalNameKey]; !ok || json.Unmarshal(raw, &named) != nil || named == "" {
				return fmt.Errorf("delta: column %q lacks %s or %s although column mapping is on: %w", path, PhysicalNameKey, ColumnIDKey, ErrCorrupt)
			}
			if id < 1 || id > maxID {
				return fmt.Errorf("delta: column %q has column mapping id %d, outside 1..%s (%d): %w", path, id, ColumnMappingMaxIDKey, maxID, ErrCorrupt)
			}
			if id > maxFieldID {
				return fmt.Errorf("delta: column %q has column mapping id %d, past %d (Parquet field ids are 32-bit): %w", path, id, maxFieldID, ErrCorrupt)
			}
			if other, dup := ids[id]; dup {
				return fmt.Errorf("delta: columns %q and %q share column mapping id %d: %w", other, path, id, ErrCorrupt)
			}
			ids[id] = path
			if names[phys] {
				return fmt.Errorf("delta: column %q: physical name %q is used twice: %w", path, phys, ErrCorrupt)
			}
			names[phys] = true
			if err := checkType(f.Type, path); err != nil {
				return err
			}
		}
		return nil
	}
	checkType = func(t DataType, path string) error {
		if err := check(t.Fields, path+"."); err != nil {
			return err
		}
		for _, c := range []*DataType{t.Element, t.Key, t.Value} {
			if c != nil {
				if err := checkType(*c, path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return check(schema.Fields, "")
}

// HighestColumnID returns the highest delta.columnMapping.id in s, at any
// depth (0 when none).
func HighestColumnID(s *Schema) int64 {
	var highest int64
	root := DataType{Name: "struct", Fields: s.Fields}
	root.walk(func(t *DataType) {
		for _, f := range t.Fields {
			if id, ok := f.ColumnID(); ok && id > highest {
				highest = id
			}
		}
	})
	return highest
}
