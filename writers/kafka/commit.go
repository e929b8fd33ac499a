package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// Commit publishes descs (this endpoint's own descriptors).
//
// Auto-commit keys are produced with the shared idempotent producer, and
// Commit returns after every delivery report (at-least-once). A
// transactional key is first checked against the marker topic: at or below
// the writer's committed epoch it is a replay that changes nothing
// (Replayed). Otherwise one Kafka transaction, under the id of the
// endpoint and writer, carries the staged records and the marker
// {writer, epoch}. Staging files are removed once committed.
//
// Commit returns once every record has had its final delivery report,
// which sarama gives within retryBudget (producer_config.go): after an
// error, no record of the commit is still being retried.
//
// Errors: ErrUnavailable when nothing was published and a retry of Commit
// may succeed (the staging file stays); ErrInvalid when the broker refused
// records for their own sake and there is no dead-letter topic;
// ErrOutcomeUnknown when records may have been published (the transaction
// commit's answer was lost, an auto-commit stream was partly acknowledged,
// or ctx ended before every report came: the message says how many
// records were acknowledged).
func (w *Writer) Commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	if _, err := w.stageOf(key, false); err != nil {
		return writers.CommitInfo{}, err
	}
	ds := make([]descriptor, 0, len(descs))
	for i, b := range descs {
		d, err := decodeDescriptor(w.env.Endpoint, i, b)
		if err != nil {
			return writers.CommitInfo{}, err
		}
		ds = append(ds, d)
	}
	start := time.Now()
	var err error
	if key.Auto {
		err = w.commitAuto(ctx, ds)
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
		if d.Path != "" {
			if err := removeIfExists(d.Path); err != nil {
				w.log.Warn("kafka sink could not remove a committed staging file", "path", d.Path, "err", err)
			}
		}
	}
}

// message converts a staged record for topic.
func message(topic string, r record) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic}
	if r.key != nil {
		m.Key = sarama.ByteEncoder(r.key)
	}
	if r.value != nil {
		m.Value = sarama.ByteEncoder(r.value)
	}
	for _, h := range r.headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: h.name, Value: h.value})
	}
	return m
}

// sendStaged sends every record of ds: data records through data, records
// staged for the dead-letter topic through w.dlq.
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
					return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s holds dead-letter records but dlq_topic is not set: set it back, or roll back and replay", d.Path)
				}
				return w.dlq.send(ctx, dlqd, message(w.cfg.DLQTopic, r))
			}
			return data.send(ctx, dd, message(w.cfg.Topic, r))
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// commitAuto produces ds at least once and waits for every report. A
// record the broker refuses for its own sake goes to the DLQ when there is
// one.
func (w *Writer) commitAuto(ctx context.Context, ds []descriptor) error {
	// Without a transaction to abort, a damaged file must be refused
	// before its first record is sent.
	for _, d := range ds {
		if d.Records > 0 {
			if err := readStage(d, func(record) error { return nil }); err != nil {
				return err
			}
		}
	}
	dd, dlqd := newDelivery(), newDelivery()
	waitStart := time.Now()
	total, sendErr := w.sendStaged(ctx, ds, w.auto, dd, dlqd)
	dd.seal()
	// Every record gets its report within retryBudget (producer_config.go),
	// so the wait ends early only when ctx does, or sarama overran its
	// budget: records still unreported may yet be delivered.
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
	defer cancel()
	if err := dd.wait(wctx); err != nil {
		acked, failed, pending := dd.snapshot()
		return outcomeUnknown(fmt.Errorf("kafka: topic %q: %d of %d records acknowledged, %d failed, %d without a delivery report after %s (%v): they may still be delivered; the stream's outcome is unknown",
			w.cfg.Topic, acked, total, len(failed), pending, time.Since(waitStart).Round(time.Millisecond), err))
	}
	acked, failed := dd.result()
	var rest []failure
	for _, f := range failed {
		if classify(f.err) == scopeRecord && w.dlq != nil {
			m := f.msg
			dl := record{headers: dlqHeaders(w.cfg.Topic, f.err.Error(), time.Now())}
			if m.Key != nil {
				dl.key, _ = m.Key.Encode()
			}
			if m.Value != nil {
				dl.value, _ = m.Value.Encode()
			}
			if err := w.dlq.send(ctx, dlqd, message(w.cfg.DLQTopic, dl)); err == nil {
				continue
			}
		}
		rest = append(rest, f)
	}
	dlqd.seal()
	if err := dlqd.wait(wctx); err != nil {
		return outcomeUnknown(fmt.Errorf("kafka: waiting for delivery reports of dead-letter topic %q: %w", w.cfg.DLQTopic, err))
	}
	dlqAcked, dlqFailed := dlqd.result()
	rest = append(rest, dlqFailed...)
	w.m.records.WithLabelValues("produced").Add(float64(acked))
	w.m.records.WithLabelValues("dlq").Add(float64(dlqAcked))
	w.m.records.WithLabelValues("failed").Add(float64(len(rest)))
	if sendErr == nil && len(rest) == 0 {
		return nil
	}
	return deliveryError(w.cfg.Topic, total, acked+dlqAcked, rest, sendErr)
}

// deliveryError classifies an incomplete delivery of total records of
// which applied were acknowledged, after the seed's policy: anything
// applied makes the outcome unknown to the client (at-least-once: the
// acknowledged records stay); otherwise infrastructure failures are
// retryable (ErrUnavailable), records the broker refused are ErrInvalid
// and anything else (authorization, fencing) ErrPermissionDenied. sendErr,
// a failure to read or send the staged records, keeps its own class.
func deliveryError(topic string, total, applied int64, failed []failure, sendErr error) error {
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
	msg := fmt.Sprintf("kafka: topic %q: %d of %d records acknowledged, %d failed; first error: %v", topic, applied, total, len(failed), first)
	if applied > 0 {
		return outcomeUnknown(errors.New(msg + " (the acknowledged records stay published: a retry of the stream duplicates them)"))
	}
	if sendErr != nil && (errors.Is(sendErr, writers.ErrInvalid) || errors.Is(sendErr, writers.ErrUnavailable)) {
		return fmt.Errorf("%s: nothing was published: %w", msg, sendErr)
	}
	// Every record has had its final report, so sarama retries none of
	// them any more (producer_config.go bounds its retries).
	hint := "nothing was published and the producer has stopped retrying: retry when Kafka is reachable"
	switch class {
	case writers.ErrInvalid:
		hint = "nothing was published: the broker refused records for their own sake; set dlq_topic to divert them"
	case writers.ErrPermissionDenied:
		hint = "nothing was published: check the producer's permissions and the broker's error"
	}
	return writers.Errorf(class, "%s: %s", msg, hint)
}

// outcomeUnknown wraps err as writers.ErrOutcomeUnknown.
func outcomeUnknown(err error) error {
	return fmt.Errorf("%w: %w", writers.ErrOutcomeUnknown, err)
}
