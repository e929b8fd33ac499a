package kafka

import (
	"context"
	"encoding/json"
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
// Errors: ErrUnavailable when nothing was published and a retry of Commit
// may succeed (the staging file stays); ErrInvalid when the broker refused
// records for their own sake and there is no dead-letter topic;
// *writers.OutcomeUnknownError when records may have been published (the
// transaction commit's answer was lost, or an auto-commit stream was
// partly acknowledged: the message says how many records).
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

// deliveryTimeout bounds how long a commit waits for delivery reports:
// sarama keeps retrying while brokers are down, and a stream must get its
// answer.
const deliveryTimeout = 20 * time.Second

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
	total, sendErr := w.sendStaged(ctx, ds, w.auto, dd, dlqd)
	dd.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	if err := dd.wait(wctx); err != nil {
		acked, failed, pending := dd.snapshot()
		return deliveryError(w.cfg.Topic, total, acked, failed, writers.Errorf(writers.ErrUnavailable,
			"%d records without a delivery report after %s (Kafka unreachable? they may still be delivered later: at-least-once)", pending, deliveryTimeout))
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
	hint := "nothing was published: retry when Kafka is reachable"
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

// marker is the value of a commit marker record.
type marker struct {
	Writer string `json:"writer"`
	Epoch  int64  `json:"epoch"`
}

// txnID is the transactional id of writer on this endpoint: stable across
// restarts (so a new producer fences and aborts a crashed attempt) and
// distinct per endpoint and writer.
func (w *Writer) txnID(writer string) string {
	return "quiver-" + w.env.Endpoint + "-" + writer
}

// commitTxn publishes ds and the marker of key in one Kafka transaction,
// unless the marker topic already holds key's epoch or a newer one.
func (w *Writer) commitTxn(ctx context.Context, key writers.TxnKey, ds []descriptor) (replayed bool, err error) {
	if epoch, ok, err := w.CommittedEpoch(ctx, key.Writer); err != nil {
		return false, err
	} else if ok && epoch >= key.Epoch {
		return true, nil
	}
	// A new producer with the same transactional id aborts whatever an
	// earlier attempt (this process's or a crashed one's) left open.
	p, err := w.newPipe(w.producerBytes, w.txnID(key.Writer))
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
		defer cancel()
		if err := p.close(cctx); err != nil {
			w.log.Warn("kafka sink: transactional producer did not close cleanly", "key", key.String(), "err", err)
		}
	}()
	if err := p.p.BeginTxn(); err != nil {
		return false, writers.Errorf(writers.ErrUnavailable, "kafka: begin transaction for %s: %v: nothing was published; retry the commit", key, err)
	}
	dd, dlqd := newDelivery(), newDelivery()
	total, sendErr := w.sendStaged(ctx, ds, p, dd, dlqd)
	if sendErr == nil {
		value, _ := json.Marshal(marker{Writer: key.Writer, Epoch: key.Epoch})
		sendErr = p.send(ctx, dd, &sarama.ProducerMessage{Topic: w.cfg.MarkerTopic, Key: sarama.StringEncoder(key.Writer), Value: sarama.ByteEncoder(value)})
	}
	dd.seal()
	dlqd.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	waitErr := errors.Join(dd.wait(wctx), dlqd.wait(wctx))
	acked, failed := dd.result()
	dlqAcked, dlqFailed := dlqd.result()
	failed = append(failed, dlqFailed...)
	if sendErr != nil || waitErr != nil || len(failed) > 0 {
		if aerr := p.p.AbortTxn(); aerr != nil {
			w.log.Warn("kafka sink could not abort a failed transaction; the next attempt's producer aborts it", "key", key.String(), "err", aerr)
		}
		if sendErr == nil {
			sendErr = waitErr
		}
		// The transaction is aborted: nothing of it is visible, whatever
		// was acknowledged (dead-letter records excepted, which are
		// at-least-once).
		err := deliveryError(w.cfg.Topic, total+1, 0, failed, sendErr)
		return false, fmt.Errorf("kafka: commit %s aborted (%d records had been acknowledged inside the transaction, %d dead-letter records published): %w", key, acked, dlqAcked, err)
	}
	if err := p.p.CommitTxn(); err != nil {
		return false, &writers.OutcomeUnknownError{Endpoint: w.env.Endpoint, Key: key, Err: fmt.Errorf("kafka: commit transaction: %w", err)}
	}
	w.m.records.WithLabelValues("produced").Add(float64(acked - 1))
	w.m.records.WithLabelValues("dlq").Add(float64(dlqAcked))
	return false, nil
}
