package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// marker is the value of a commit marker record; its key is markerKey.
type marker struct {
	Endpoint string `json:"endpoint"`
	Writer   string `json:"writer"`
	Epoch    int64  `json:"epoch"`
}

// markerKey is the compaction key of writer's markers on this endpoint.
// Endpoint names hold no "/", so it is unambiguous; the endpoint is part of
// it because one transaction commits on several endpoints that may share
// the marker topic, each under the same writer and epoch.
func (w *Writer) markerKey(writer string) string { return w.env.Endpoint + "/" + writer }

// markerRecord returns the key and value of key's commit marker.
func (w *Writer) markerRecord(key writers.TxnKey) (k, v []byte) {
	v, _ = json.Marshal(marker{Endpoint: w.env.Endpoint, Writer: key.Writer, Epoch: key.Epoch})
	return []byte(w.markerKey(key.Writer)), v
}

// recordOverhead bounds a record's own framing inside a batch (length,
// attributes, timestamp and offset deltas, key and value lengths, header
// count: varints of at most 5 or 10 bytes).
const recordOverhead = 40

// checkMarker refuses, at precommit, a transaction whose commit marker the
// marker topic would refuse: its commit could never succeed, and a decided
// commit cannot be rolled back.
func (w *Writer) checkMarker(key writers.TxnKey) error {
	if key.Auto {
		return nil
	}
	k, v := w.markerRecord(key)
	if n := len(k) + len(v) + recordOverhead; n > w.markerBytes {
		return writers.Errorf(writers.ErrInvalid, "kafka: the commit marker of %s is %d bytes, more than marker topic %q takes (max.message.bytes %d less %d bytes of batch header): raise the topic's max.message.bytes or use a shorter writer name", key, n, w.cfg.MarkerTopic, w.markerBytes+batchOverhead, batchOverhead)
	}
	return nil
}

// txnID is the transactional id of writer on this endpoint: stable across
// restarts (so a new producer fences and aborts a crashed attempt) and
// distinct per endpoint and writer.
func (w *Writer) txnID(writer string) string { return "quiver/" + w.markerKey(writer) }

// abortedError is a commit attempt that failed before the Kafka commit
// and was aborted (or never began): nothing of it is visible, so it may be
// retried. It reads as the error it wraps.
type abortedError struct{ err error }

func (e *abortedError) Error() string { return e.err.Error() }
func (e *abortedError) Unwrap() error { return e.err }

// commitTxn publishes ds and the marker of key in one Kafka transaction,
// unless writer's committed epoch (cached, or read from the marker topic)
// is key's epoch or a newer one. Commits of one writer are serialized: a
// transactional id has at most one open transaction.
//
// The producer of writer is kept for the next commit. A reused producer
// that fails before the Kafka commit (fenced by another process that took
// the same transactional id, or a broken connection) is replaced and the
// commit retried once with a fresh producer and a fresh marker read.
func (w *Writer) commitTxn(ctx context.Context, key writers.TxnKey, ds []descriptor) (replayed bool, err error) {
	slot, err := w.acquireTxn(key.Writer)
	if err != nil {
		return false, err
	}
	defer w.releaseTxn(slot)
	for {
		reused := slot.p != nil
		replayed, err := w.commitAttempt(ctx, slot, key, ds)
		if err == nil {
			return replayed, nil
		}
		w.dropProducer(ctx, slot)
		var aborted *abortedError
		if !reused || !errors.As(err, &aborted) {
			return false, err
		}
		w.log.Info("kafka sink: a reused transactional producer failed; retrying the commit with a new one", "key", key.String(), "err", err)
	}
}

// commitAttempt runs one commit of key on slot (held): it starts the
// producer if there is none, learns writer's committed epoch if the slot
// does not know it, and produces ds and the marker in one transaction.
//
// The cached epoch is sound because it is tied to the live producer: it
// is read only after the producer's InitProducerId, which fences every
// earlier producer of the transactional id, and only this producer's
// commits (which update the cache) can write writer's markers until some
// other process fences it; a fenced producer fails its next transaction,
// and that failure drops the producer and the cache together.
func (w *Writer) commitAttempt(ctx context.Context, slot *txnSlot, key writers.TxnKey, ds []descriptor) (bool, error) {
	if slot.p == nil {
		// A new producer with the same transactional id aborts whatever an
		// earlier attempt (this process's or a crashed one's) left open.
		p, err := w.newPipe(w.producerBytes, w.txnID(key.Writer), writerTxnTimeout)
		if err != nil {
			return false, err
		}
		slot.p, slot.known = p, false
	}
	if !slot.known {
		epoch, found, err := w.readMarkers(ctx, key.Writer)
		if err != nil {
			return false, err
		}
		slot.epoch, slot.found, slot.known = epoch, found, true
	}
	if slot.found && slot.epoch >= key.Epoch {
		return true, nil
	}
	p := slot.p
	if err := p.p.BeginTxn(); err != nil {
		return false, &abortedError{writers.Errorf(writers.ErrUnavailable, "kafka: begin transaction for %s: %w: nothing was published; retry the commit", key, err)}
	}
	dd, dlqd := newDelivery(), newDelivery()
	total, sendErr := w.sendStaged(ctx, ds, p, dd, dlqd)
	if sendErr == nil {
		mk, mv := w.markerRecord(key)
		sendErr = p.send(ctx, dd, &sarama.ProducerMessage{Topic: w.cfg.MarkerTopic, Key: sarama.ByteEncoder(mk), Value: sarama.ByteEncoder(mv)})
	}
	dd.seal()
	dlqd.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
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
		err := deliveryError(w.cfg.Topic, total+1, acked, failed, sendErr)
		return false, &abortedError{fmt.Errorf("kafka: commit %s aborted (%d dead-letter records published): %w", key, dlqAcked, err)}
	}
	if err := p.p.CommitTxn(); err != nil {
		return false, &writers.OutcomeUnknownError{Endpoint: w.env.Endpoint, Key: key, Err: fmt.Errorf("kafka: commit transaction: %w", err)}
	}
	slot.epoch, slot.found = key.Epoch, true
	w.m.records.WithLabelValues("produced").Add(float64(acked - 1))
	w.m.records.WithLabelValues("dlq").Add(float64(dlqAcked))
	return false, nil
}
