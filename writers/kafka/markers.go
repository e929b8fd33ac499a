package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	var epoch int64
	found := false
	err := w.scanMarkers(ctx, map[string]bool{writer: true}, func(m marker) {
		if m.Writer == writer && (!found || m.Epoch > epoch) {
			epoch, found = m.Epoch, true
		}
	})
	return epoch, found, err
}

// scanMarkers reads every committed marker of this endpoint (read_committed,
// up to the last stable offset of each partition) and hands it to seen.
// It fails Unavailable when a marker of one of names lies past a last
// stable offset that an open transaction holds (see readCommitted).
func (w *Writer) scanMarkers(ctx context.Context, names map[string]bool, seen func(marker)) error {
	w.m.markerReads.Inc()
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	topic := w.cfg.MarkerTopic
	parts, err := w.adm.cl.Partitions(topic)
	if err != nil {
		return w.markerError(ctx, err)
	}
	prefix := w.markerKey("")
	wanted := func(k []byte) bool {
		name, ok := strings.CutPrefix(string(k), prefix)
		return ok && names[name]
	}
	for _, p := range parts {
		err := w.adm.readCommitted(ctx, topic, p, wanted, func(k, v []byte) {
			if !strings.HasPrefix(string(k), prefix) || v == nil {
				return
			}
			var m marker
			if json.Unmarshal(v, &m) == nil && m.Endpoint == w.env.Endpoint && string(k) == w.markerKey(m.Writer) {
				seen(m)
			}
		})
		if err != nil {
			return w.markerError(ctx, fmt.Errorf("partition %d: %w", p, err))
		}
	}
	return nil
}

// markerError classifies a failed read of the marker topic: the caller's
// cancellation stays one; anything else is a broker error (brokerError).
func (w *Writer) markerError(ctx context.Context, err error) error {
	err = fmt.Errorf("read marker topic %q: %w", w.cfg.MarkerTopic, err)
	if errors.Is(err, errUnsettled) {
		return writers.Errorf(writers.ErrUnavailable, "kafka: %w (a commit of the same writer still in flight, or crashed and left open until the broker aborts it at its transaction timeout): retry", err)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("kafka: %w", err)
	}
	return w.brokerError(err)
}
