package deltalayout

import (
	"strings"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Column names are held to the rules of Delta's reference implementation,
// Delta Lake on Spark, so that every table Quiver writes stays writable by
// Spark (a name Spark refuses fails its next metadata commit, e.g. an
// ALTER TABLE or a schema-merging write):
//
//   - No name, at any level (struct fields, and fields of structs inside
//     arrays and maps), contains one of invalidNameChars. Spark:
//     SchemaUtils.checkSchemaFieldNames over
//     SchemaMergingUtils.explodeNestedFieldNames, unless column mapping is
//     on; error class DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES. With
//     column mapping the files hold physical names, so the rule is lifted
//     there too.
//   - No two names of one struct differ only in case (Spark resolves names
//     case-insensitively: SchemaMergingUtils.checkColumnNameDuplication,
//     DELTA_DUPLICATE_COLUMNS_FOUND). deltalog.FromArrow and
//     deltalog.ParseSchema enforce it at every level, as the protocol
//     layer must never write a schema it would refuse to read.

// invalidNameChars are the characters Spark refuses in the column names of
// a table without column mapping: Parquet's schema syntax uses them.
const invalidNameChars = " ,;{}()\n\t="

// CheckNames refuses a schema with a column name Spark refuses
// (invalidNameChars), with ErrInvalid naming the column by its dotted path
// (array elements and map keys and values as Spark names them: element,
// key, value). A table with column mapping (conf) accepts any name.
func CheckNames(s *deltalog.Schema, conf map[string]string) error {
	if deltalog.ColumnMappingMode(conf) != "none" {
		return nil
	}
	return checkFieldNames(s.Fields, "")
}

func checkFieldNames(fields []deltalog.StructField, parent string) error {
	for _, f := range fields {
		path := parent + f.Name
		if i := strings.IndexAny(f.Name, invalidNameChars); i >= 0 {
			return writers.Errorf(writers.ErrInvalid, "delta: column %q: the name contains %q, one of the characters %q that Spark refuses in Delta column names without column mapping (DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES): rename the column", path, f.Name[i:i+1], invalidNameChars)
		}
		if err := checkTypeNames(f.Type, path); err != nil {
			return err
		}
	}
	return nil
}

func checkTypeNames(t deltalog.DataType, path string) error {
	if t.Fields != nil {
		return checkFieldNames(t.Fields, path+".")
	}
	for _, c := range []struct {
		name string
		t    *deltalog.DataType
	}{{"element", t.Element}, {"key", t.Key}, {"value", t.Value}} {
		if c.t == nil {
			continue
		}
		if err := checkTypeNames(*c.t, path+"."+c.name); err != nil {
			return err
		}
	}
	return nil
}
