package mergeinsert

import (
	"fmt"
	"io"
	"os"
)

// LanceDBRates measures LanceDB's mergeInsert (on [id], update_all +
// insert_all) of the scenario's first source (workload.MergeSource round 0:
// sourceRows rows, half of them updates) into a storage-2.0 dataset of
// baseRows rows of the standard workload, without and with a BTREE index on
// id: rows/s of execute() for each. Other benchmarks (the Delta upsert
// scenario) use it as their reference. It needs node and npm.
func LanceDBRates(baseRows, sourceRows int64, log io.Writer) (plain, indexed float64, err error) {
	o := Options{BaseRows: baseRows, SourceRows: sourceRows}
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	dir, err := os.MkdirTemp("", "quiverbench-merge-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	lance, err := newLanceDB(dir, "")
	if err != nil {
		return 0, 0, err
	}
	if err := lance.createBase(baseRows, log); err != nil {
		return 0, 0, err
	}
	srcs, err := writeSources(dir, o)
	if err != nil {
		return 0, 0, err
	}
	var rates [2]float64
	for i, t := range []string{plainTable, indexedTable} {
		r, err := lance.merges(t, srcs[:1], sourceRows, log)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", t, err)
		}
		rates[i] = r.cold
	}
	return rates[0], rates[1], nil
}
