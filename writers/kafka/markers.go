package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quiver-ingest/quiver/writers"
)

// readTimeout bounds one read of the marker topic.
const readTimeout = 30 * time.Second

// CommittedEpoch reads the marker topic with read_committed up to its last
// stable offset and returns the highest epoch writer committed on this
// endpoint. Markers of aborted or still open transactions are never seen.
// It always reads: the epoch Commit caches is tied to its transactional
// producer, and the coordinator asks this only at recovery. Errors:
// ErrUnavailable when the brokers cannot be read.
func (w *Writer) CommittedEpoch(ctx context.Context, writer string) (int64, bool, error) {
	if _, err := w.stageOf(writers.TxnKey{}, false); err != nil {
		return 0, false, err
	}
	return w.readMarkers(ctx, writer)
}

// readMarkers reads writer's markers of this endpoint (see CommittedEpoch).
func (w *Writer) readMarkers(ctx context.Context, writer string) (int64, bool, error) {
	w.m.markerReads.Inc()
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	topic := w.cfg.MarkerTopic
	starts, err := w.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, false, unreachable(err)
	}
	ends, err := w.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, false, unreachable(err)
	}
	// Partitions with committed data, and the offset each must reach.
	from := map[int32]kgo.Offset{}
	last := map[int32]int64{}
	for p, end := range ends[topic] {
		if end.Err != nil {
			return 0, false, unreachable(end.Err)
		}
		start := starts[topic][p].Offset
		if end.Offset > start {
			from[p] = kgo.NewOffset().At(start)
			last[p] = end.Offset - 1
		}
	}
	if len(from) == 0 {
		return 0, false, nil
	}
	// Control records are kept so the read knows it reached the last
	// stable offset even when the log ends with a commit marker.
	cl, err := w.newAdmin(
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
	)
	if err != nil {
		return 0, false, err
	}
	defer cl.Close()
	var epoch int64
	found := false
	key := w.markerKey(writer)
	for len(last) > 0 {
		fs := cl.PollFetches(ctx)
		if errors.Is(ctx.Err(), context.Canceled) {
			return 0, false, fmt.Errorf("kafka: read marker topic %q: %w", topic, ctx.Err())
		}
		if err := ctx.Err(); err != nil {
			return 0, false, writers.Errorf(writers.ErrUnavailable, "kafka: read marker topic %q: %w (check that Kafka is up)", topic, err)
		}
		for _, fe := range fs.Errors() {
			return 0, false, writers.Errorf(writers.ErrUnavailable, "kafka: read marker topic %q partition %d: %w", topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := last[r.Partition]; ok && r.Offset >= end {
				delete(last, r.Partition)
			}
			if r.Attrs.IsControl() || string(r.Key) != key || r.Value == nil {
				return
			}
			var m marker
			if json.Unmarshal(r.Value, &m) == nil && m.Endpoint == w.env.Endpoint && m.Writer == writer && (!found || m.Epoch > epoch) {
				epoch, found = m.Epoch, true
			}
		})
	}
	return epoch, found, nil
}
