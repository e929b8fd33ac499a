package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Commit publishes descs (this endpoint's own descriptors).
//
// An auto-commit key commits the Kafka transaction its records were sent
// in (autotxn.go), after producing its dead-letter records; it is
// forgotten whatever the outcome. A transactional key is first checked against the marker topic: at or below
// the writer's committed epoch it is a replay that changes nothing
// (Replayed). Otherwise one Kafka transaction, under the id of the
// endpoint and writer, carries the staged records and the marker
// {writer, epoch}. Staging files are removed once committed.
//
// Descriptors are client input: each may name only the staging file key
// itself precommitted, in the endpoint's staging folder, and two may not
// name the same one (descriptor.go); anything else is ErrInvalid before
// any file is read or removed.
//
// Errors: ErrUnavailable when nothing was published and a retry of Commit
// may succeed (the staging file stays); ErrInvalid when the broker refused
// records for their own sake (inside a transaction that aborts it);
// ErrWrongState for an auto-commit key whose transaction is gone;
// ErrOutcomeUnknown when the Kafka commit's answer was lost.
func (w *Writer) Commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	if _, err := w.stageOf(key, false); err != nil {
		return writers.CommitInfo{}, err
	}
	ds := make([]descriptor, 0, len(descs))
	for i, b := range descs {
		d, err := w.decodeDescriptor(key, i, b)
		if err != nil {
			return writers.CommitInfo{}, err
		}
		if j := slices.IndexFunc(ds, func(o descriptor) bool { return o.path != "" && o.path == d.path }); j >= 0 {
			return writers.CommitInfo{}, writers.Errorf(writers.ErrInvalid, "kafka: endpoint %q: descriptors %d and %d name the same staging file %s: its records would be produced twice", w.env.Endpoint, j, i, d.path)
		}
		ds = append(ds, d)
	}
	start := time.Now()
	var err error
	if key.Auto {
		err = w.commitAuto(ctx, key, ds)
	} else {
		var replayed bool
		replayed, err = w.commitTxn(ctx, key, ds)
		if err == nil && replayed {
			w.finish(key, ds)
			return writers.CommitInfo{Version: writers.NoVersion, Replayed: true}, nil
		}
	}
	if err != nil {
		w.m.commits.WithLabelValues("failed").Inc()
		return writers.CommitInfo{}, err
	}
	w.m.commits.WithLabelValues("committed").Inc()
	w.m.commitSeconds.Observe(time.Since(start).Seconds())
	w.finish(key, ds)
	return writers.CommitInfo{Version: writers.NoVersion}, nil
}

// finish forgets key and removes its committed staging files.
func (w *Writer) finish(key writers.TxnKey, ds []descriptor) {
	w.forget(key)
	for _, d := range ds {
		if d.path != "" {
			if err := removeIfExists(d.path); err != nil {
				w.log.Warn("kafka sink could not remove a committed staging file", "path", d.path, "err", err)
			}
		}
	}
}

// sendStaged sends every record of ds: data records through data, records
// staged for the dead-letter topic through w.dlq. With data nil (an
// auto-commit stream) ds may hold only dead-letter records.
func (w *Writer) sendStaged(ctx context.Context, ds []descriptor, data *pipe, dd, dlqd *delivery) (int64, error) {
	var n int64
	for _, d := range ds {
		if d.Records == 0 {
			continue
		}
		err := readStage(d, func(r record) error {
			n++
			if r.dlq {
				if w.dlq == nil {
					return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s holds dead-letter records but dlq_topic is not set: set it back, or roll back and replay", d.path)
				}
				return w.dlq.send(ctx, dlqd, message(w.cfg.DLQTopic, r))
			}
			if data == nil {
				return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s of an auto-commit stream holds data records: it was replaced; send the stream again", d.path)
			}
			return data.send(ctx, dd, message(w.cfg.Topic, r))
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// deliveryError classifies a Kafka transaction that failed to deliver and
// is aborted: of total records sent, acked were acknowledged inside it and
// failed were refused or timed out; none is visible to read_committed
// consumers. Infrastructure failures are retryable (ErrUnavailable),
// records the broker refused are ErrInvalid and anything else
// (authorization, fencing) ErrPermissionDenied. sendErr, a failure to read
// or send the records, keeps its class when it has one.
func deliveryError(topic string, total, acked int64, failed []failure, sendErr error) error {
	first, class := sendErr, writers.ErrUnavailable
	if len(failed) > 0 {
		first = failed[0].err
	}
	for _, f := range failed {
		switch classify(f.err) {
		case scopeRecord:
			class = writers.ErrInvalid
		case scopeSink:
			if class != writers.ErrInvalid {
				class = writers.ErrPermissionDenied
			}
		}
	}
	msg := fmt.Sprintf("kafka: topic %q: %d of %d records acknowledged inside the transaction, %d failed; first error: %v", topic, acked, total, len(failed), first)
	if sendErr != nil && (errors.Is(sendErr, writers.ErrInvalid) || errors.Is(sendErr, writers.ErrUnavailable)) {
		return fmt.Errorf("%s: the transaction is aborted, nothing was published: %w", msg, sendErr)
	}
	// Every record has had its final report (producer_config.go bounds the
	// retries), or the transaction is aborted by its producer's successor.
	hint := "the transaction is aborted, nothing was published and the producer has stopped retrying: retry when Kafka is reachable"
	switch class {
	case writers.ErrInvalid:
		hint = "the transaction is aborted, nothing was published: the broker refused records for their own sake (inside a transaction one refusal fails all; only records above max.message.bytes are diverted to dlq_topic)"
	case writers.ErrPermissionDenied:
		hint = "the transaction is aborted, nothing was published: check the producer's permissions and the broker's error"
	}
	return writers.Errorf(class, "%s: %s", msg, hint)
}

// outcomeUnknown wraps err as writers.ErrOutcomeUnknown.
func outcomeUnknown(err error) error {
	return fmt.Errorf("%w: %w", writers.ErrOutcomeUnknown, err)
}
