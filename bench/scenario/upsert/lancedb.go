package upsert

import (
	"io"

	"github.com/quiver-ingest/quiver/bench/scenario/mergeinsert"
)

// lanceDBMerge measures LanceDB's mergeInsert of the first changelog into
// a dataset like the table (the reference of the Delta upsert issue),
// without and with a BTREE index on id.
func lanceDBMerge(o Options, log io.Writer) ([]row, error) {
	plain, indexed, err := mergeinsert.LanceDBRates(o.TableRows, o.ChangeRows, log)
	if err != nil {
		return nil, err
	}
	return []row{
		{target: "lancedb-mergeInsert", run: run{rowsPerSec: plain, seconds: float64(o.ChangeRows) / plain}},
		{target: "lancedb-mergeInsert-btree", run: run{rowsPerSec: indexed, seconds: float64(o.ChangeRows) / indexed}},
	}, nil
}
