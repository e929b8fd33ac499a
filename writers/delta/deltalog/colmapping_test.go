package deltalog

import (
	"errors"
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
	top := AssignColumnMapping(s, prev, 6)
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
