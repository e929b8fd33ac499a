package kafka

import "testing"

func TestStickyPartitioner(t *testing.T) {
	p := &stickyPartitioner{batch: 3}
	var got []int32
	for range 9 {
		part, err := p.Partition(nil, 4)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, part)
	}
	for i := 0; i < 9; i += 3 {
		if got[i] != got[i+1] || got[i] != got[i+2] {
			t.Fatalf("partitions %v: want runs of 3", got)
		}
		if i > 0 && got[i] != (got[i-1]+1)%4 {
			t.Fatalf("partitions %v: want the next partition after each run", got)
		}
	}
}
