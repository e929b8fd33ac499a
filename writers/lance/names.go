package lance

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// Column names are held to the rules of Lance's own implementation (lance
// 8.0.0, the core of LanceDB 0.31.0), so that every dataset Quiver writes
// is one LanceDB creates, opens and reads. Each rule says where Lance
// applies it; names it accepts at create time but cannot read back are
// refused too:
//
//   - A top-level name is not empty: Lance stores it, but its reader then
//     fails to project the column ("No field named .").
//   - A top-level name contains no '.': lance-core Schema::validate ("Top
//     level field … cannot contain `.`"), as Lance addresses nested fields
//     by dotted paths.
//   - A top-level name contains no '`': Lance's reader resolves column
//     names as paths (lance-core parse_field_path) in which backticks
//     quote, so it cannot find such a column ("No field named …").
//   - No two top-level names are equal: lance-core Schema::validate
//     ("Duplicate field name …"). Names differing only in case are
//     distinct columns to Lance.
//   - No two fields of one struct (at any depth, also inside lists) have
//     equal names: Lance writes them, but its reader fails on the dataset
//     ("TakeExec requires the input plan to have a column named '_rowaddr'
//     or '_rowid'").
//   - A top-level name is none of Lance's system columns (lance-core
//     ROW_ID, ROW_ADDR, ROW_OFFSET, ROW_CREATED_AT_VERSION,
//     ROW_LAST_UPDATED_AT_VERSION) nor the columns its searches add
//     (lance-index DIST_COL and SCORE_COL); see systemColumns.
//
// Nested names may contain '.' and '`', and may be empty: Lance reads
// them back.

// systemColumns maps the top-level names Lance reserves to why.
var systemColumns = map[string]string{
	// lance dataset/write/insert.rs: "The column _rowid is a reserved name
	// and cannot be used in a Lance dataset".
	"_rowid":     "a reserved name Lance refuses in a dataset (its row id)",
	"_rowaddr":   "a reserved name Lance refuses in a dataset (its row address)",
	"_rowoffset": "a reserved name Lance refuses in a dataset (its row offset)",
	// Written, but every scan then panics: lance-core Projection::to_schema
	// adds the system columns ("would lead to duplicate field names").
	"_row_created_at_version":      "a Lance system column (row version tracking): Lance's reader fails on a dataset with such a column",
	"_row_last_updated_at_version": "a Lance system column (row version tracking): Lance's reader fails on a dataset with such a column",
	// Read, but searches fail: "Attempt to merge incompatible fields".
	"_distance": "the column Lance's vector search adds to its results: searches of the dataset would fail",
	"_score":    "the column Lance's full-text search adds to its results: searches of the dataset would fail",
}

// checkNames refuses a schema with a column name Lance refuses or cannot
// read back, with ErrInvalid naming the column (dotted path for nested
// fields) and the rule.
func checkNames(s *arrow.Schema) error {
	seen := make(map[string]bool, s.NumFields())
	for _, f := range s.Fields() {
		why := ""
		switch {
		case f.Name == "":
			why = "an empty name, which Lance's reader cannot project"
		case strings.Contains(f.Name, "."):
			why = "Lance refuses '.' in top-level names (it addresses nested fields by dotted paths)"
		case strings.Contains(f.Name, "`"):
			why = "Lance's reader cannot resolve a top-level name containing '`' (backticks quote its column paths)"
		case seen[f.Name]:
			why = "a second column of this name, which Lance refuses"
		default:
			why = systemColumns[f.Name]
		}
		if why != "" {
			return nameError(f.Name, why)
		}
		seen[f.Name] = true
		if err := checkNestedNames(f.Type, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// checkNestedNames refuses equal names among the fields of a struct
// within t (at any depth, lists included).
func checkNestedNames(t arrow.DataType, path string) error {
	switch t := t.(type) {
	case *arrow.StructType:
		seen := make(map[string]bool, t.NumFields())
		for _, f := range t.Fields() {
			if seen[f.Name] {
				return nameError(path+"."+f.Name, "a second field of this name in its struct, which Lance's reader fails on")
			}
			seen[f.Name] = true
			if err := checkNestedNames(f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
	case arrow.ListLikeType:
		return checkNestedNames(t.Elem(), path+"."+t.ElemField().Name)
	}
	return nil
}

func nameError(path, why string) error {
	return writers.Errorf(writers.ErrInvalid, "lance: column %q: %s: rename the column", path, why)
}
