package deltalog

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestCheckColumnMapping: complete metadata passes; every kind of
// incomplete or inconsistent metadata (hostile or corrupt logs) is
// ErrCorrupt naming the column, never a panic.
func TestCheckColumnMapping(t *testing.T) {
	field := func(name string, id int, phys string) string {
		return `{"name":"` + name + `","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":` +
			strconv.Itoa(id) + `,"delta.columnMapping.physicalName":"` + phys + `"}}`
	}
	nested := `{"name":"s","type":{"type":"struct","fields":[` + field("a", 3, "col-a") + `]},"nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-s"}}`
	for _, tc := range []struct {
		name, fields string
		max          int64
		want         string // "" passes
	}{
		{"complete", field("x", 1, "col-x") + "," + nested, 3, ""},
		{"id above max", field("x", 4, "col-x"), 3, `"x"`},
		{"id zero", field("x", 0, "col-x"), 3, `"x"`},
		{"id past 32 bits", field("x", math.MaxInt32+1, "col-x"), 1 << 40, "32-bit"},
		{"shared id", field("x", 1, "col-x") + "," + field("y", 1, "col-y"), 3, "share"},
		{"shared physical name", field("x", 1, "col-x") + "," + field("y", 2, "col-x"), 3, "used twice"},
		{"nested id above max", field("x", 1, "col-x") + "," + nested, 2, `"s.a"`},
		{"no metadata", `{"name":"x","type":"integer","nullable":true,"metadata":{}}`, 3, "lacks"},
		{"id not a number", `{"name":"x","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":"1","delta.columnMapping.physicalName":"p"}}`, 3, "lacks"},
		{"physical name not a string", `{"name":"x","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":7}}`, 3, "lacks"},
		{"empty physical name", `{"name":"x","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":""}}`, 3, "lacks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchema(`{"type":"struct","fields":[` + tc.fields + `]}`)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckColumnMapping(s, tc.max)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckColumnMapping: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckColumnMapping: %v, want ErrCorrupt naming %s", err, tc.want)
			}
		})
	}
}

// TestAssignColumnMapping: fields without mapping get consecutive ids after
// maxID (nested fields too) and col-<uuid> names; fields of prev keep
// theirs; mapped fields are untouched.
func TestAssignColumnMapping(t *testing.T) {
	s, err := ParseSchema(`{"type":"struct","fields":[
		{"name":"old","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-old"}},
		{"name":"again","type":"long","nullable":true,"metadata":{}},
		{"name":"new","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := ParseSchema(`{"type":"struct","fields":[{"name":"again","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":6,"delta.columnMapping.physicalName":"col-again"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	top, err := AssignColumnMapping(s, prev, 6)
	if err != nil {
		t.Fatal(err)
	}
	if top != 8 {
		t.Fatalf("highest id %d, want 8", top)
	}
	if err := CheckColumnMapping(s, top); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.Field("old"); f.PhysicalName() != "col-old" {
		t.Errorf("old: %s", f.PhysicalName())
	}
	if f, _ := s.Field("again"); f.PhysicalName() != "col-again" {
		t.Errorf("again: %s, want prev's", f.PhysicalName())
	}
	f, _ := s.Field("new")
	inner := f.Type.Element.Fields[0]
	if id, _ := f.ColumnID(); id != 7 || !strings.HasPrefix(f.PhysicalName(), "col-") {
		t.Errorf("new: id %d, %s", id, f.PhysicalName())
	}
	if id, _ := inner.ColumnID(); id != 8 || !strings.HasPrefix(inner.PhysicalName(), "col-") || inner.PhysicalName() == f.PhysicalName() {
		t.Errorf("new.element.a: id %d, %s", id, inner.PhysicalName())
	}
	if HighestColumnID(s) != 8 {
		t.Errorf("HighestColumnID %d", HighestColumnID(s))
	}
}

// TestSchemaFeatureRules: column mapping in name and id mode and type
// changes of top-level columns are writable; an unknown mapping mode,
// incomplete mapping metadata and nested type changes are refused naming
// the feature.
func TestSchemaFeatureRules(t *testing.T) {
	mapped := `{"name":"x","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-x"}}`
	widened := `{"name":"x","type":"long","nullable":true,"metadata":{"delta.typeChanges":[{"toType":"long","fromType":"integer"}]}}`
	nested := `{"name":"s","type":{"type":"struct","fields":[` + widened + `]},"nullable":true,"metadata":{}}`
	element := `{"name":"x","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{"delta.typeChanges":[{"toType":"long","fromType":"integer","fieldPath":"element"}]}}`
	cm := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping"}, WriterFeatures: []string{"columnMapping"}}
	tw := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"typeWidening"}, WriterFeatures: []string{"typeWidening"}}
	for _, tc := range []struct {
		name   string
		p      Protocol
		field  string
		conf   map[string]string
		refuse string // "" writable
	}{
		{"name mode", cm, mapped, map[string]string{ColumnMappingModeKey: "name", ColumnMappingMaxIDKey: "1"}, ""},
		{"id mode", cm, mapped, map[string]string{ColumnMappingModeKey: "id", ColumnMappingMaxIDKey: "1"}, ""},
		{"legacy reader 2", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, mapped, map[string]string{ColumnMappingModeKey: "name", ColumnMappingMaxIDKey: "1"}, ""},
		{"unknown mode", cm, mapped, map[string]string{ColumnMappingModeKey: "path", ColumnMappingMaxIDKey: "1"}, "columnMapping"},
		{"max id missing", cm, mapped, map[string]string{ColumnMappingModeKey: "name"}, "columnMapping"},
		{"max id not a number", cm, mapped, map[string]string{ColumnMappingModeKey: "name", ColumnMappingMaxIDKey: "x"}, "columnMapping"},
		{"top-level type change", tw, widened, nil, ""},
		{"nested type change", tw, nested, nil, "typeWidening"},
		{"element type change", tw, element, nil, "typeWidening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Protocol: tc.p, Metadata: Metadata{SchemaString: `{"type":"struct","fields":[` + tc.field + `]}`, Configuration: tc.conf}}
			err := CheckWritable(s)
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("CheckWritable: %v", err)
			case tc.refuse != "" && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.refuse)):
				t.Fatalf("CheckWritable: %v, want ErrUnsupported naming %s", err, tc.refuse)
			}
		})
	}
}

// TestAssignColumnMappingPast32Bits: ids past 2^31-1 (Parquet field ids
// are 32-bit) are refused, also from a maxColumnId near MaxInt64 (no
// wrap-around).
func TestAssignColumnMappingPast32Bits(t *testing.T) {
	for _, maxID := range []int64{math.MaxInt32, math.MaxInt64} {
		s, err := ParseSchema(`{"type":"struct","fields":[{"name":"n","type":"long","nullable":true,"metadata":{}}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if top, err := AssignColumnMapping(s, nil, maxID); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "32-bit") {
			t.Errorf("AssignColumnMapping after %d: %d, %v, want ErrUnsupported", maxID, top, err)
		}
	}
	s, err := ParseSchema(`{"type":"struct","fields":[{"name":"n","type":"long","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if top, err := AssignColumnMapping(s, nil, math.MaxInt32-1); err != nil || top != math.MaxInt32 {
		t.Errorf("AssignColumnMapping of the last id: %d, %v", top, err)
	}
}
