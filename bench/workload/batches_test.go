package workload

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestTotalIPCBodyBytes(t *testing.T) {
	batches := generateT(t, DefaultSeed, 1000, 300)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var want int64
	for _, b := range batches {
		n, err := IPCBodyBytes(mem, b)
		if err != nil {
			t.Fatal(err)
		}
		want += n
	}
	got, err := TotalIPCBodyBytes(mem, batches)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got <= 0 {
		t.Errorf("TotalIPCBodyBytes = %d, want the sum of IPCBodyBytes %d (> 0)", got, want)
	}
	if empty, err := TotalIPCBodyBytes(mem, nil); err != nil || empty != 0 {
		t.Errorf("TotalIPCBodyBytes(nil) = %d, %v; want 0, nil", empty, err)
	}
}
