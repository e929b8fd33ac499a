package workload

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ReleaseAll releases every batch of recs, such as the batches Generate
// returned.
func ReleaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// TotalIPCBodyBytes returns the sum of IPCBodyBytes over recs: the bytes
// a stream sending them carries as FlightData bodies.
func TotalIPCBodyBytes(mem memory.Allocator, recs []arrow.RecordBatch) (int64, error) {
	var total int64
	for _, r := range recs {
		n, err := IPCBodyBytes(mem, r)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
