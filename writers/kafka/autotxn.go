package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// Auto-commit streams run each inside a Kafka transaction of its own, on a
// transactional producer leased from the endpoint's pool (autopool.go) at
// the stream's first record: Write sends each batch's records as it
// arrives, Precommit waits for every delivery report, Commit commits the
// transaction, Rollback (or any failure) aborts it. So encoding and
// producing overlap, and a read_committed consumer sees a stream whole or
// not at all. There is no marker and no epoch: across a crash the stream
// is at-least-once (its open transaction is aborted, the client retries).

// autoInflightBytes bounds the key and value bytes of one auto-commit
// stream that are sent and not yet acknowledged: Write blocks beyond it,
// so a slow broker holds back the client instead of filling memory.
const autoInflightBytes = 16 << 20

// autoTxn is the open Kafka transaction of one auto-commit stream. It
// belongs to the stream's stage; Write, Precommit, Commit and Rollback of
// one key are never concurrent.
type autoTxn struct {
	prod *autoProducer
	d    *delivery // budgeted by autoInflightBytes
	sent int64
}

// beginAuto leases a producer and begins a transaction on it.
func (w *Writer) beginAuto(ctx context.Context) (*autoTxn, error) {
	prod, err := w.leaseAuto()
	if err != nil {
		return nil, err
	}
	if err := prod.p.p.BeginTxn(); err != nil {
		w.returnAuto(ctx, prod, false)
		return nil, writers.Errorf(writers.ErrUnavailable, "kafka: begin the transaction of an auto-commit stream: %w: nothing was sent; send the stream again", err)
	}
	return &autoTxn{prod: prod, d: newBudgetedDelivery(autoInflightBytes)}, nil
}

// keep copies b into st's slab, so it outlives the encoder's buffers until
// sarama reports it. Slabs are never reused: the garbage collector frees a
// slab once all its messages have been reported and dropped. A nil b
// stays nil (a keyless record, a tombstone).
func (st *stage) keep(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 {
		return []byte{}
	}
	if cap(st.slab)-len(st.slab) < len(b) {
		st.slab = make([]byte, 0, max(1<<20, len(b)))
	}
	start := len(st.slab)
	st.slab = append(st.slab, b...)
	return st.slab[start:len(st.slab):len(st.slab)]
}

// sendAuto sends the messages st.msgs holds (one whole batch) in key's
// transaction, beginning it on the first one. It blocks while the stream's
// in-flight budget is spent. A send cut short (ctx ended) leaves part of
// the batch in the transaction, so it fails the stream.
func (w *Writer) sendAuto(ctx context.Context, st *stage) error {
	if len(st.msgs) == 0 {
		return nil
	}
	if st.auto == nil {
		a, err := w.beginAuto(ctx)
		if err != nil {
			return err
		}
		st.auto = a
	}
	a := st.auto
	n, err := a.prod.p.sendAll(ctx, a.d, st.msgs)
	a.sent += int64(n)
	if err != nil {
		st.failed = writers.Errorf(writers.ErrUnavailable, "kafka: auto-commit stream cut while sending a batch (%w): roll it back and send it again", err)
		return st.failed
	}
	clear(st.msgs) // the stage must not pin reported messages
	return nil
}

// flushAuto waits (st precommitting) until every record of st's
// transaction has its delivery report. Any failure aborts the transaction
// and fails the stream.
func (w *Writer) flushAuto(ctx context.Context, st *stage) error {
	a := st.auto
	a.d.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
	defer cancel()
	if err := a.d.wait(wctx); err != nil {
		return w.failAuto(ctx, st, fmt.Errorf("waiting for delivery reports: %w", err))
	}
	if a.d.failures() > 0 {
		return w.failAuto(ctx, st, nil)
	}
	return nil
}

// failAuto aborts st's transaction after failed deliveries (or cause) and
// returns the stream's error, which every later call on the key repeats.
// Nothing of the transaction is visible to read_committed consumers.
func (w *Writer) failAuto(ctx context.Context, st *stage, cause error) error {
	a := st.auto
	acked, failed, _ := a.d.snapshot()
	w.m.records.WithLabelValues("failed").Add(float64(len(failed)))
	err := deliveryError(w.cfg.Topic, a.sent, acked, failed, cause)
	st.failed = fmt.Errorf("kafka: auto-commit stream aborted: %w", err)
	w.abortAuto(ctx, st, false)
	return st.failed
}

// abortAuto aborts st's transaction, if any (sarama first waits for the
// reports of records in flight, within retryBudget), and returns its
// producer to the pool. When the abort fails (Kafka unreachable) the
// producer is closed instead and the transaction stays open on the broker
// until a new producer takes its id (the pool's lowest free index, so the
// next producer started) or the transaction timeout ends it; it stays
// invisible to read_committed consumers either way.
//
// Without wait the abort runs in the background (Close waits for it): a
// failed stream's answer need not wait for EndTxn retries against a
// broker that is likely down.
func (w *Writer) abortAuto(ctx context.Context, st *stage, wait bool) {
	a := st.auto
	if a == nil {
		return
	}
	st.auto = nil
	abort := func() {
		err := a.prod.p.p.AbortTxn()
		if err != nil {
			w.log.Warn("kafka sink could not abort the transaction of an auto-commit stream; its producer is closed", "err", err)
		}
		w.returnAuto(context.WithoutCancel(ctx), a.prod, err == nil)
	}
	if wait {
		abort()
		return
	}
	// In the background nothing would recover a panic: log it instead of
	// ending the process.
	w.aborts.Go(func() {
		var err error
		defer func() {
			if err != nil {
				w.log.Error("kafka sink: the background abort of an auto-commit stream panicked", "err", err, "stack", writers.PanicStack(err))
			}
		}()
		defer writers.Recover(&err)
		abort()
	})
}

// commitAuto commits the auto-commit stream key: it publishes the records
// st staged for the dead-letter topic (outside the transaction, at least
// once), then commits the stream's transaction. The stage is forgotten
// whatever happens: a failed auto-commit is never retried on the key.
func (w *Writer) commitAuto(ctx context.Context, key writers.TxnKey, ds []descriptor) error {
	w.mu.Lock()
	st := w.stages[key]
	w.mu.Unlock()
	defer w.finish(key, ds)
	if st != nil && st.failed != nil {
		return st.failed
	}
	if st != nil && st.desc == nil {
		w.abortAuto(ctx, st, true)
		return writers.Errorf(writers.ErrWrongState, "kafka: commit of auto-commit stream %s before its precommit: its transaction is aborted; send the stream again", key)
	}
	if st == nil {
		for _, d := range ds {
			if d.Produced > 0 || d.Records > 0 {
				return writers.Errorf(writers.ErrWrongState, "kafka: the transaction of auto-commit stream %s is gone (committed, rolled back, or lost with a restart): send the stream again", key)
			}
		}
		return nil
	}
	if err := w.publishDeadLetters(ctx, ds); err != nil {
		w.abortAuto(ctx, st, true)
		return err
	}
	a := st.auto
	if a == nil {
		return nil
	}
	st.auto = nil
	if err := a.prod.p.p.CommitTxn(); err != nil {
		w.returnAuto(ctx, a.prod, false)
		return outcomeUnknown(fmt.Errorf("kafka: commit the transaction of auto-commit stream %s (%d records acknowledged inside it): %w: it may or may not be visible", key, a.sent, err))
	}
	w.returnAuto(ctx, a.prod, true)
	w.m.records.WithLabelValues("produced").Add(float64(a.sent))
	return nil
}

// publishDeadLetters produces the dead-letter records staged in ds with
// the DLQ producer and waits for their reports.
func (w *Writer) publishDeadLetters(ctx context.Context, ds []descriptor) error {
	dlqd := newDelivery()
	total, sendErr := w.sendStaged(ctx, ds, nil, nil, dlqd)
	dlqd.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
	defer cancel()
	waitErr := dlqd.wait(wctx)
	acked, failed := dlqd.result()
	w.m.records.WithLabelValues("dlq").Add(float64(acked))
	first := errors.Join(sendErr, waitErr)
	if first == nil && len(failed) == 0 {
		return nil
	}
	if first == nil {
		first = failed[0].err
	}
	class := writers.ErrUnavailable
	if errors.Is(sendErr, writers.ErrInvalid) {
		class = writers.ErrInvalid
	}
	return writers.Errorf(class, "kafka: auto-commit stream aborted: dead-letter topic %q: %d of %d records acknowledged (those stay published), %d failed; first error: %v; send the stream again",
		w.cfg.DLQTopic, acked, total, len(failed), first)
}

// autoMessage is a message with the encoders of its key and value, so
// that making one is a single allocation (an interface holding a
// pointer allocates nothing).
type autoMessage struct {
	sarama.ProducerMessage
	key, value sarama.ByteEncoder
}

// message converts record r of an auto-commit batch for topic, taking
// the message from st's arena: one allocation per batch of about hint
// messages. The garbage collector frees an arena once sarama reported
// and dropped all its messages.
func (st *stage) message(topic string, r record, hint int) *sarama.ProducerMessage {
	if len(st.arena) == 0 {
		st.arena = make([]autoMessage, max(hint, 1))
	}
	m := &st.arena[0]
	st.arena = st.arena[1:]
	m.Topic = topic
	if r.key != nil {
		m.key = r.key
		m.Key = &m.key
	}
	if r.value != nil {
		m.value = r.value
		m.Value = &m.value
	}
	return &m.ProducerMessage
}

// message converts a record for topic.
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
