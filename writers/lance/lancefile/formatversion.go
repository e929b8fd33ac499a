package lancefile

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// Lance file format versions. A dataset's data storage version (its
// manifest's data_format) is the format of the data files it holds; Quiver
// reads and writes 2.0, 2.1 and 2.2. Newer versions are Lance's unstable
// "next" formats, refused with the reason.

// ParseFormatVersion returns the minor version of "2.0", "2.1" or "2.2".
func ParseFormatVersion(v string) (uint16, error) {
	switch v {
	case "2.0":
		return 0, nil
	case "2.1":
		return 1, nil
	case "2.2":
		return 2, nil
	}
	return 0, writers.Errorf(writers.ErrInvalid, "lance: data storage version %q is not one Quiver writes (2.0, 2.1, 2.2)", v)
}

// readableVersion maps a data file footer's version to the 2.x minor
// version this reader decodes, or refuses it naming the reason.
func readableVersion(major, minor uint16) (uint16, error) {
	switch {
	case major == footerMajor20 && minor == footerMinor20, major == 2 && minor == 0:
		return 0, nil
	case major == 2 && (minor == 1 || minor == 2):
		return minor, nil
	case major == 0 && minor < 3:
		return 0, writers.Errorf(writers.ErrInvalid, "lance: data file format legacy (0.1) is not supported: Quiver reads and writes Lance file formats 2.0, 2.1 and 2.2")
	}
	return 0, writers.Errorf(writers.ErrInvalid, "lance: data file format %d.%d is not supported: Quiver reads and writes Lance file formats 2.0, 2.1 and 2.2 (newer versions are Lance's unstable \"next\" formats; write the table with data_storage_version \"2.2\")", major, minor)
}

// newerType reports the types Quiver writes in 2.1+ only.
func newerType(dt arrow.DataType) bool {
	switch dt.(type) {
	case *arrow.DurationType, *arrow.Decimal128Type, *arrow.Decimal256Type, *arrow.LargeListType, *arrow.DictionaryType:
		return true
	}
	for _, t := range newerTypes {
		if arrow.TypeEqual(t, dt) {
			return true
		}
	}
	return false
}

// DefaultFormat is the file format (2.minor) of a new dataset when none
// is configured: 2.2, pylance's default.
const DefaultFormat = 2

// CheckFormatTypes reports, as ErrInvalid naming the column, an Arrow
// type that Quiver maps to Lance but does not write in format 2.minor.
func CheckFormatTypes(s *arrow.Schema, minor uint16) error {
	var walk func(path string, dt arrow.DataType, top bool) error
	walk = func(path string, dt arrow.DataType, top bool) error {
		if dt.ID() == arrow.MAP && minor < 2 {
			// pylance: "Map data type is not enabled by the selected file format".
			return writers.Errorf(writers.ErrInvalid, "lance: column %q is a map, which Lance stores in file format 2.2 and later only (this dataset is 2.%d): create the dataset with data_storage_version \"2.2\"", path, minor)
		}
		if dt.ID() == arrow.DICTIONARY && !top {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q is a dictionary inside a struct, list or fixed_size_list, which Quiver does not write: decode it to its value type", path)
		}
		if minor == 0 && newerType(dt) {
			return writers.Errorf(writers.ErrInvalid, "lance: column %q has type %s, which Quiver writes in Lance file formats 2.1 and 2.2 only: create the dataset with data_storage_version \"2.2\"", path, dt)
		}
		switch t := dt.(type) {
		case *arrow.StructType:
			if minor > 0 && t.NumFields() == 0 {
				// Files of 2.1 and later store leaf columns only.
				return writers.Errorf(writers.ErrInvalid, "lance: column %q is a struct without fields, which Lance file format 2.%d cannot store: add a field or drop the column", path, minor)
			}
			for _, f := range t.Fields() {
				if err := walk(path+"."+f.Name, f.Type, false); err != nil {
					return err
				}
			}
		case *arrow.FixedSizeListType:
			// Its items are no column of their own: only a dictionary
			// among them is refused (2.0 writes vectors of any item).
			if t.Elem().ID() == arrow.DICTIONARY {
				return walk(path+".item", t.Elem(), false)
			}
		case arrow.ListLikeType:
			return walk(path+".item", t.Elem(), false)
		}
		return nil
	}
	for _, f := range s.Fields() {
		if err := walk(f.Name, f.Type, true); err != nil {
			return err
		}
	}
	return nil
}
