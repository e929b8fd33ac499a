package workload

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// IPCBodyBytes returns the size of rec's Arrow IPC message body (buffers
// with padding, no compression): the bytes a DoPut carries as FlightData
// body for the batch, which is what MB/s figures count.
func IPCBodyBytes(mem memory.Allocator, rec arrow.RecordBatch) (int64, error) {
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(mem))
	if err != nil {
		return 0, fmt.Errorf("workload: encode batch: %w", err)
	}
	defer p.Release()
	var n countingWriter
	if err := p.SerializeBody(&n); err != nil {
		return 0, fmt.Errorf("workload: encode batch: %w", err)
	}
	return int64(n), nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
