package kafka

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
)

// valueEncoder is kafkaenc.JSON or kafkaenc.Avro.
type valueEncoder interface {
	Encode(rec arrow.RecordBatch, out *kafkaenc.Batch) error
	Schema() *arrow.Schema
}

// encoder turns one key's batches into records. It belongs to the key's
// stage: not safe for concurrent use. It keeps one value encoder per
// schema seen (a changed schema derives and registers a new Avro schema).
type encoder struct {
	w      *Writer
	values map[string]valueEncoder // by schema fingerprint
	keys   *kafkaenc.Keys
	kb, vb kafkaenc.Batch
	now    func() time.Time
	// first is the row of the batch the record encoded starts at (a
	// chunk of a larger batch): errors name rows of the batch.
	first int
}

func newEncoder(w *Writer) *encoder {
	return &encoder{w: w, values: map[string]valueEncoder{}, now: time.Now}
}

// valueEncoder returns the encoder of schema s, deriving (and, for Avro,
// registering) it on first use.
func (e *encoder) valueEncoder(ctx context.Context, s *arrow.Schema) (valueEncoder, error) {
	fp := s.String()
	if v, ok := e.values[fp]; ok {
		return v, nil
	}
	var v valueEncoder
	switch e.w.cfg.Format {
	case FormatAvro:
		a, err := kafkaenc.NewAvro(s, e.w.cfg.Topic)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "kafka: %w", err)
		}
		id, err := e.w.registry.Register(ctx, a.SchemaText())
		if err != nil {
			return nil, registryError(err)
		}
		a.SetID(id)
		v = a
	default:
		j, err := kafkaenc.NewJSON(s, kafkaenc.Options{EpochMillis: e.w.cfg.Timestamps == TimestampsEpochMillis})
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "kafka: %w", err)
		}
		v = j
	}
	e.values[fp] = v
	return v, nil
}

// emitFunc receives each record of a batch. The record's bytes are the
// encoder's and valid only during the call: keep a copy.
type emitFunc func(record)

// encode passes rec's records to emit and returns their count. On error
// some records may have been emitted: the caller collects them and uses
// them only when encode succeeds, so a batch goes out whole or not at all.
func (e *encoder) encode(ctx context.Context, rec arrow.RecordBatch, emit emitFunc) (int, error) {
	if e.w.cfg.KeyColumn != "" && e.keys == nil {
		k, err := kafkaenc.NewKeys(rec.Schema(), e.w.cfg.KeyColumn)
		if err != nil {
			return 0, writers.Errorf(writers.ErrInvalid, "kafka: key_column: %w", err)
		}
		e.keys = k
	}
	if e.w.cfg.Envelope == EnvelopeUpsert {
		return e.upsert(ctx, rec, emit)
	}
	return e.rows(ctx, rec, false, emit)
}

// upsert collapses rec per key (merge: last row wins, _op D deletes) and
// emits a value per live key and a tombstone per deleted key. Empty keys
// fail the batch: a compacted topic cannot hold them (null keys are
// refused by merge).
func (e *encoder) upsert(ctx context.Context, rec arrow.RecordBatch, emit emitFunc) (int, error) {
	res, err := merge.Collapse(rec, merge.Options{Keys: []string{e.w.cfg.KeyColumn}, Allocator: e.w.env.Allocator})
	if err != nil {
		return 0, fmt.Errorf("kafka: upsert envelope: %w", err)
	}
	defer res.Release()
	total := 0
	for _, live := range res.Live {
		n, err := e.rows(ctx, live, false, emit)
		if err != nil {
			return 0, err
		}
		total += n
	}
	for _, del := range res.Deleted {
		n, err := e.rows(ctx, del, true, emit)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// rows emits the records of rec's rows (tombstones when deletes) and
// returns their count. A record the broker would refuse (divert) is
// emitted for the dead-letter topic.
func (e *encoder) rows(ctx context.Context, rec arrow.RecordBatch, deletes bool, emit emitFunc) (int, error) {
	n := int(rec.NumRows())
	e.kb.Reset()
	e.vb.Reset()
	if e.keys != nil {
		if err := e.keys.Encode(rec, &e.kb); err != nil {
			return 0, writers.Errorf(writers.ErrInvalid, "kafka: key_column: %w", err)
		}
	}
	if !deletes {
		v, err := e.valueEncoder(ctx, rec.Schema())
		if err != nil {
			return 0, err
		}
		if err := v.Encode(rec, &e.vb); err != nil {
			return 0, writers.Errorf(writers.ErrInvalid, "kafka: %w", err)
		}
	}
	upsert := e.w.cfg.Envelope == EnvelopeUpsert
	for i := range n {
		r := record{}
		if e.keys != nil {
			r.key = e.kb.Row(i)
		}
		if upsert && len(r.key) == 0 {
			return 0, writers.Errorf(writers.ErrInvalid, "kafka: upsert envelope: row %d has an empty key in column %q: a compacted topic needs a non-empty key; nothing of this batch is published", e.first+i, e.w.cfg.KeyColumn)
		}
		if !deletes {
			r.value = e.vb.Row(i)
		}
		r, err := e.divert(e.first+i, r)
		if err != nil {
			return 0, err
		}
		emit(r)
	}
	return n, nil
}

// divert returns r (row i) marked for the dead-letter topic when the
// broker would refuse it for its own sake, as predicted from the topic's
// configs read at Open: a null key for a compacted topic (INVALID_RECORD)
// or a size above max.message.bytes. It is decided here, before anything
// is sent, because a refusal inside the stream's Kafka transaction would
// abort the whole stream. Without dlq_topic (or when the dead-letter topic
// would refuse the record too) it fails the batch instead: ErrInvalid for
// a keyless record, ErrExhausted for an oversized one.
func (e *encoder) divert(i int, r record) (record, error) {
	w := e.w
	if r.key == nil && w.keyRequired {
		switch {
		case w.cfg.DLQTopic == "":
			return r, writers.Errorf(writers.ErrInvalid, "kafka: row %d has no key (a null key_column value, or no key_column) and topic %q is compacted (cleanup.policy), which refuses keyless records: give the row a key or set dlq_topic; nothing of this batch is published", i, w.cfg.Topic)
		case w.dlqKeyRequired:
			return r, writers.Errorf(writers.ErrInvalid, "kafka: row %d has no key and both topic %q and dlq_topic %q are compacted (cleanup.policy), which refuse keyless records: give the row a key or use a dlq_topic that is not compacted; nothing of this batch is published", i, w.cfg.Topic, w.cfg.DLQTopic)
		}
		return e.deadLetter(r, fmt.Sprintf("record without a key for compacted topic %s (cleanup.policy compact): the broker refuses it (INVALID_RECORD)", w.cfg.Topic)), nil
	}
	if size := recordSize(r); size > w.maxRecordBytes {
		if w.cfg.DLQTopic == "" {
			return r, writers.Errorf(writers.ErrExhausted, "kafka: row %d makes a record of %d bytes, above the %d bytes topic %q accepts (max.message.bytes): shrink the row, raise the topic's limit or set dlq_topic", i, size, w.maxRecordBytes, w.cfg.Topic)
		}
		return e.deadLetter(r, fmt.Sprintf("record of %d bytes exceeds the %d bytes topic %s accepts (max.message.bytes)", size, w.maxRecordBytes, w.cfg.Topic)), nil
	}
	return r, nil
}

// deadLetter marks r for the dead-letter topic with the __dlq.* headers.
func (e *encoder) deadLetter(r record, reason string) record {
	r.dlq = true
	r.headers = dlqHeaders(e.w.cfg.Topic, reason, e.now())
	return r
}

func dlqHeaders(topic, reason string, at time.Time) []header {
	return []header{
		{name: []byte("__dlq.error"), value: []byte(reason)},
		{name: []byte("__dlq.topic"), value: []byte(topic)},
		{name: []byte("__dlq.timestamp"), value: strconv.AppendInt(nil, at.UnixMilli(), 10)},
	}
}

// recordSize is what sarama counts against Producer.MaxMessageBytes for a
// v2 record: a fixed overhead of 36 bytes (varints at their widest), the
// key and value, and per header its bytes plus 10.
func recordSize(r record) int {
	n := 36 + len(r.key) + len(r.value)
	for _, h := range r.headers {
		n += 10 + len(h.name) + len(h.value)
	}
	return n
}
