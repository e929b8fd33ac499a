package devbroker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted returns every record of topic that a read_committed
// consumer sees now (up to each partition's last stable offset), ordered
// by partition then offset: what tests check a sink published. It blocks
// until it has read that far or ctx ends.
func ReadCommitted(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: offsets of %s: %w", topic, err)
	}
	from := map[int32]kgo.Offset{}
	last := map[int32]int64{}
	for p, o := range ends[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("embedded kafka: offsets of %s/%d: %w", topic, p, o.Err)
		}
		if o.Offset > 0 {
			from[p] = kgo.NewOffset().AtStart()
			last[p] = o.Offset - 1
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	// Control records are kept so the read knows it reached the end even
	// when a partition ends with a transaction marker.
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for len(last) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embedded kafka: reading %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := last[r.Partition]; ok && r.Offset >= end {
				delete(last, r.Partition)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}
