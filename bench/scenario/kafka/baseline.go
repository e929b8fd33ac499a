package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
)

// records are the key and value bytes of one stream's records, exactly
// as the sink produces them, in one pointer-free buffer. The baselines
// hold millions of them while Quiver is measured in the same process: a
// slice per key and value would make every garbage collection of the run
// scan them, a cost charged to whoever allocates most (Quiver, which
// decodes and encodes), and it grew with --rows (Quiver/sarama fell from
// about 1× at 1M records a stream to 0.73× at 3M).
type records struct {
	buf  []byte
	ends []int // ends[2i] ends record i's key, ends[2i+1] its value
}

func (r *records) len() int { return len(r.ends) / 2 }

// kv returns record i's key and value (capped: appending cannot touch the
// next record).
func (r *records) kv(i int) (key, value []byte) {
	start := 0
	if i > 0 {
		start = r.ends[2*i-1]
	}
	k, v := r.ends[2*i], r.ends[2*i+1]
	return r.buf[start:k:k], r.buf[k:v:v]
}

func (r *records) meanBytes() float64 { return float64(len(r.buf)) / float64(r.len()) }

// warmRecords are produced before the clock starts, so that connections,
// metadata and producer ids stay out of the measurement.
const warmRecords = 1000

// serialize encodes the standard workload's rows as the sink's endpoint
// of format does: key column id, JSON with ISO-8601 timestamps, or Avro
// named after the endpoint's topic and registered under its subject (so
// the schema id, and every byte, is the sink's).
func serialize(ctx context.Context, format string, rows int64, registry string) (*records, error) {
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return nil, err
	}
	defer workload.ReleaseAll(batches)
	schema := workload.Schema()
	keys, err := kafkaenc.NewKeys(schema, "id")
	if err != nil {
		return nil, err
	}
	var values interface {
		Encode(arrow.RecordBatch, *kafkaenc.Batch) error
	}
	switch format {
	case "avro":
		a, err := kafkaenc.NewAvro(schema, quiverTopic(format))
		if err != nil {
			return nil, err
		}
		r, err := kafkaenc.NewRegistry(quiverTopic(format)+"-value", sr.URLs(registry))
		if err != nil {
			return nil, err
		}
		id, err := r.Register(ctx, a.SchemaText())
		if err != nil {
			return nil, err
		}
		a.SetID(id)
		values = a
	default:
		if values, err = kafkaenc.NewJSON(schema, kafkaenc.Options{}); err != nil {
			return nil, err
		}
	}
	out := &records{ends: make([]int, 0, 2*rows)}
	var kb, vb kafkaenc.Batch
	for _, b := range batches {
		kb.Reset()
		vb.Reset()
		if err := keys.Encode(b, &kb); err != nil {
			return nil, err
		}
		if err := values.Encode(b, &vb); err != nil {
			return nil, err
		}
		for i := range kb.Len() {
			out.buf = append(out.buf, kb.Row(i)...)
			out.ends = append(out.ends, len(out.buf))
			out.buf = append(out.buf, vb.Row(i)...)
			out.ends = append(out.ends, len(out.buf))
		}
	}
	return out, nil
}

// produceSarama uses a bare sarama AsyncProducer with the sink's settings
// (writers/kafka producerConfig): idempotent, acks=all, one request in
// flight, murmur2, a 4096-message channel buffer.
func produceSarama(ctx context.Context, m meter, l listener, topic string, recs *records, streams int) (span, error) {
	c, err := l.saramaConfig()
	if err != nil {
		return span{}, err
	}
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewMurmur2Partitioner
	c.Producer.MaxMessageBytes = 1048588 - 100
	c.ChannelBufferSize = 4096
	p, err := sarama.NewAsyncProducer(l.sec.Brokers, c)
	if err != nil {
		return span{}, err
	}
	defer p.Close()
	send := func(n int, streams int) (span, error) {
		start := m.start()
		var wg sync.WaitGroup
		for range streams {
			wg.Go(func() {
				for i := range n {
					k, v := recs.kv(i)
					select {
					case p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(k), Value: sarama.ByteEncoder(v)}:
					case <-ctx.Done():
						return
					}
				}
			})
		}
		var errs []error
		for range n * streams {
			select {
			case <-p.Successes():
			case e := <-p.Errors():
				errs = append(errs, e)
			case <-ctx.Done():
				return span{}, ctx.Err()
			}
		}
		wg.Wait()
		if len(errs) > 0 {
			return span{}, fmt.Errorf("%d records failed, first: %w", len(errs), errs[0])
		}
		return m.since(start), nil
	}
	if _, err := send(min(warmRecords, recs.len()), 1); err != nil {
		return span{}, fmt.Errorf("warm-up: %w", err)
	}
	return send(recs.len(), streams)
}

// produceFranz uses a franz-go client with its defaults (idempotent,
// acks=all) but for compression, which is off as in the sink's default and
// bare sarama (franz-go's default, snappy, would send it fewer bytes), and
// Java's murmur2 key partitioner.
func produceFranz(ctx context.Context, m meter, l listener, topic string, recs *records, streams int) (span, error) {
	opts, err := l.franzOpts()
	if err != nil {
		return span{}, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.ProducerBatchCompression(kgo.NoCompression()))...)
	if err != nil {
		return span{}, err
	}
	defer cl.Close()
	send := func(n int, streams int) (span, error) {
		start := m.start()
		var failed atomic.Int64
		var first atomic.Pointer[error]
		done := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				first.CompareAndSwap(nil, &err)
			}
		}
		var wg sync.WaitGroup
		for range streams {
			wg.Go(func() {
				for i := range n {
					k, v := recs.kv(i)
					cl.Produce(ctx, &kgo.Record{Key: k, Value: v}, done)
				}
			})
		}
		wg.Wait()
		if err := cl.Flush(ctx); err != nil {
			return span{}, err
		}
		if n := failed.Load(); n > 0 {
			return span{}, fmt.Errorf("%d records failed, first: %w", n, *first.Load())
		}
		if ctx.Err() != nil {
			return span{}, errors.New("interrupted")
		}
		return m.since(start), nil
	}
	if _, err := send(min(warmRecords, recs.len()), 1); err != nil {
		return span{}, fmt.Errorf("warm-up: %w", err)
	}
	return send(recs.len(), streams)
}
