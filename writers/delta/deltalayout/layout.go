package deltalayout

import (
	"slices"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Layout is how the data files of rows of one Delta schema are
// written into a table: the columns whose statistics they carry, the
// table's column mapping (nil without) and the constraints their rows
// must satisfy (constraints.go).
type Layout struct {
	stats *StatsColumns
	Cols  *ColumnMap
	Cons  []deltalog.Constraint
	// checks binds cons once per Arrow schema of the rows checked.
	checks checks
}

// LayoutOf returns the layout of files of rows of Delta schema merged
// (the table's columns, then those the rows add, column mapping assigned)
// in the table of snap: statistics for the columns of its
// delta.dataSkippingStatsColumns or delta.dataSkippingNumIndexedCols, as
// Spark reads them, and its column mapping.
func LayoutOf(snap *deltalog.Snapshot, merged *deltalog.Schema) (*Layout, error) {
	stats, err := StatsColumnsOf(merged, snap.Metadata.PartitionColumns, snap.Metadata.Configuration)
	if err != nil {
		return nil, err
	}
	names := merged
	if table, err := snap.Schema(); err == nil {
		// An upsert planned on a later version than its rows were
		// admitted at fills in the columns added since (deltaupsert.KeptColumns).
		names = &deltalog.Schema{Fields: slices.Clone(merged.Fields)}
		for _, f := range table.Fields {
			if _, ok := merged.Field(f.Name); !ok {
				names.Fields = append(names.Fields, f)
			}
		}
	}
	cons, err := TableConstraints(snap)
	if err != nil {
		return nil, err
	}
	return &Layout{stats: stats, Cols: NewColumnMap(snap.Metadata.Configuration, names), Cons: cons}, nil
}
