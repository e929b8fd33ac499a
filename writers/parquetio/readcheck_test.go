package parquetio

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/alloccheck"
)

// Data files another process wrote (a Delta table's files read by an
// upsert) go through arrow-go's reader: the hostile layouts that make
// parquet-go allocate gigabytes (see OpenChecked) are errors there, not
// allocations sized by a field. This guards that across arrow-go updates.
func TestReadFileAllocationBounded(t *testing.T) {
	for name, b := range layoutSeeds(t) {
		var err error
		alloccheck.Below(t, name, func() {
			r, oerr := ReadFile(context.Background(), bytes.NewReader(b), int64(len(b)), memory.DefaultAllocator, ReadOptions{})
			if err = oerr; err != nil {
				return
			}
			defer r.Release()
			for r.Next() {
			}
			err = r.Err()
		})
		if (name == "valid") != (err == nil) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
