package workload

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestMergeSource checks the merge benchmark's source: half updates of
// distinct existing ids, half inserts of distinct new ids, and no id
// shared by two rounds.
func TestMergeSource(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const baseRows, srcRows = 1000, 100
	seen := map[int64]int{} // id -> round
	for round := range 3 {
		recs, err := MergeSource(mem, baseRows, srcRows, round)
		if err != nil {
			t.Fatal(err)
		}
		var updates, inserts, rows int64
		for _, rec := range recs {
			if !rec.Schema().Equal(Schema()) {
				t.Fatalf("round %d: schema %v, want the workload's", round, rec.Schema())
			}
			for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
				if r, dup := seen[id]; dup {
					t.Fatalf("round %d: id %d already used by round %d", round, id, r)
				}
				seen[id] = round
				if id < baseRows {
					updates++
				} else {
					inserts++
				}
			}
			rows += rec.NumRows()
		}
		ReleaseAll(recs)
		if rows != srcRows || updates != srcRows/2 || inserts != srcRows/2 {
			t.Errorf("round %d: %d rows, %d updates, %d inserts; want %d, half each", round, rows, updates, inserts, srcRows)
		}
	}
	if _, err := MergeSource(mem, baseRows, 1, 0); err == nil {
		t.Error("a 1-row source was accepted")
	}
}
