package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

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
	epochs, err := w.scanMarkers(ctx, map[string]bool{writer: true})
	epoch, found := epochs[writer]
	return epoch, found, err
}

// markerView is what the sink has read of the marker topic (identified
// by its topic id: one deleted and created again is another): the highest
// committed epoch of every writer of this endpoint up to next, the offset
// each partition's next read starts from. Reads go on from there (a group
// commit reads the markers every commit interval; the topic holds a
// record per writer that ever committed). It grows with the writers of
// the endpoint, as the compacted topic does.
type markerView struct {
	mu     sync.Mutex // guards the fields; reads run outside it
	topic  sarama.Uuid
	next   map[int32]int64
	epochs map[string]int64
}

// scanMarkers reads the committed markers of this endpoint
// (read_committed, up to the last stable offset of each partition) that
// the sink has not read yet, and returns the highest epoch of each of
// names that has one. It fails Unavailable when a marker of one of names
// lies past a last stable offset that an open transaction holds (see
// readCommitted). Reads run concurrently: each goes on from the view as it
// was when it began, and folds what it read into it at its end (epochs
// and offsets only grow).
func (w *Writer) scanMarkers(ctx context.Context, names map[string]bool) (map[string]int64, error) {
	w.m.markerReads.Inc()
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	topic := w.cfg.MarkerTopic
	id, parts, err := w.adm.topicPartitions(topic)
	if err != nil {
		return nil, w.markerError(ctx, err)
	}
	v := &w.markers
	v.mu.Lock()
	if v.topic != id || v.next == nil {
		v.topic, v.next, v.epochs = id, map[int32]int64{}, map[string]int64{}
	}
	from := maps.Clone(v.next)
	v.mu.Unlock()

	prefix := w.markerKey("")
	wanted := func(k []byte) bool {
		name, ok := strings.CutPrefix(string(k), prefix)
		return ok && names[name]
	}
	// read reads every partition from its offset in from (nil: their
	// starts), folding the markers into the highest epoch per writer.
	read := func(from map[int32]int64) (next map[int32]int64, epochs map[string]int64, err error) {
		next, epochs = map[int32]int64{}, map[string]int64{}
		fold := func(k, val []byte) {
			w.m.markerRecords.Inc()
			if !strings.HasPrefix(string(k), prefix) || val == nil {
				return
			}
			var m marker
			if json.Unmarshal(val, &m) == nil && m.Endpoint == w.env.Endpoint && string(k) == w.markerKey(m.Writer) {
				raise(epochs, m.Writer, m.Epoch)
			}
		}
		for _, p := range parts {
			if next[p], err = w.adm.readCommitted(ctx, topic, p, from[p], wanted, fold); err != nil {
				return nil, nil, fmt.Errorf("partition %d: %w", p, err)
			}
		}
		return next, epochs, nil
	}
	next, epochs, err := read(from)
	rewound := errors.Is(err, errRewound)
	if rewound {
		// A partition's offsets went back (an unclean leader election):
		// every partition is read again from its start.
		w.log.Warn("kafka marker topic's offsets went back: reading it again from its start", "topic", topic, "err", err)
		next, epochs, err = read(nil)
	}
	if err != nil {
		return nil, w.markerError(ctx, err)
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if v.topic != id {
		return nil, writers.Errorf(writers.ErrUnavailable, "kafka: marker topic %q was created again during a read of its markers: retry", topic)
	}
	if rewound {
		v.next, v.epochs = map[int32]int64{}, map[string]int64{}
	}
	for p, n := range next {
		v.next[p] = max(v.next[p], n)
	}
	for writer, e := range epochs {
		raise(v.epochs, writer, e)
	}
	out := make(map[string]int64, len(names))
	for name := range names {
		if e, ok := v.epochs[name]; ok {
			out[name] = e
		}
	}
	return out, nil
}

// raise records epoch as writer's in epochs unless it holds a higher one.
func raise(epochs map[string]int64, writer string, epoch int64) {
	if e, ok := epochs[writer]; !ok || epoch > e {
		epochs[writer] = epoch
	}
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
