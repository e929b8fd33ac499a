package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka/kafkaenc"
)

// openTimeout bounds the broker and registry calls of Open and Check.
const openTimeout = 15 * time.Second

// Writer is the Kafka sink's writer. All methods are safe for concurrent
// use within the writers.Writer contract.
type Writer struct {
	cfg      *Config
	env      writers.Env
	log      *slog.Logger
	m        *metrics
	dir      string             // staging folder
	registry *kafkaenc.Registry // avro only

	// Set by Open, read-only until Close.
	adm            *admin
	dlq            *pipe         // idempotent producer of dead-letter records; nil without dlq_topic
	producerBytes  int           // Producer.MaxMessageBytes of data producers
	maxRecordBytes int           // larger records go to the DLQ when encoded
	markerBytes    int           // room for one commit marker record in the marker topic
	keyRequired    bool          // the topic is compacted: keyless records go to the DLQ when encoded
	dlqKeyRequired bool          // the DLQ topic is compacted too: keyless records cannot go there
	instance       string        // of the data_dir, in auto-commit transactional ids
	autoTimeout    time.Duration // transaction timeout of auto-commit streams

	autoPool autoPool       // transactional producers of auto-commit streams
	markers  markerView     // what has been read of the marker topic
	aborts   sync.WaitGroup // background aborts of failed auto-commit streams

	mu     sync.Mutex // guards the following fields
	stages map[writers.TxnKey]*stage
	txns   map[string]*txnSlot // by writer
	opened bool
	closed bool
}

// stage is what one key has written. Transactions stage every record in
// sw; auto-commit streams stage only their dead-letter records there and
// send the others in their Kafka transaction (auto).
type stage struct {
	enc    *encoder
	sw     *stageWriter // nil until the first staged record
	desc   *descriptor  // set by Precommit
	auto   *autoTxn     // auto-commit keys: the open transaction, from the first record sent
	failed error        // auto-commit keys: the stream failed; every later call repeats it

	// Per-Write scratch: the batch's frames to stage and messages to send,
	// and the slab auto-commit record bytes are copied into (autotxn.go).
	frames []byte
	msgs   []*sarama.ProducerMessage
	slab   []byte
	arena  []autoMessage // the batch's messages not handed out yet
}

var _ writers.Writer = (*Writer)(nil)

// New returns an unopened writer for cfg (validated) in env.
func New(cfg *Config, env writers.Env) (*Writer, error) {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		cfg:    cfg,
		env:    env,
		log:    env.Logger,
		dir:    filepath.Join(env.DataDir, "kafka", env.Endpoint),
		stages: map[writers.TxnKey]*stage{},
		txns:   map[string]*txnSlot{},
	}
	if cfg.Format == FormatAvro {
		opts, err := cfg.registryOpts()
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "kafka: %w", err)
		}
		r, err := kafkaenc.NewRegistry(cfg.Topic+"-value", opts...)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "kafka: schema_registry.url: %w", err)
		}
		w.registry = r
	}
	m, err := newMetrics(env.Registerer)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
}

// Contract: exactly-once for transactions (at-least-once for auto-commit
// streams, see the package comment), append or upsert envelope, no
// cross-server aggregation (a Kafka transaction belongs to one producer).
func (w *Writer) Contract() writers.Contract {
	return writers.Contract{Delivery: "exactly-once", Modes: []string{EnvelopeAppend, EnvelopeUpsert}}
}

// Open prepares the staging folder (removing files of streams that never
// reached precommit before a crash) and the instance id, checks the topic
// (creating it with create_topic), reads its partition count,
// max.message.bytes and cleanup.policy and the broker's transaction.max.timeout.ms, creates
// the marker topic when missing, applies the registry compatibility level
// and starts the dead-letter producer. Auto-commit producers start with
// the first streams.
func (w *Writer) Open(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := w.cleanStaging(); err != nil {
		return err
	}
	if w.instance, err = w.loadInstance(); err != nil {
		return err
	}
	if w.adm, err = w.newAdmin(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.closeClients()
		}
	}()
	topic, err := w.ensureTopic(ctx, w.adm, w.cfg.Topic, w.cfg.CreateTopic, "set create_topic")
	if err != nil {
		return err
	}
	w.producerBytes = topic.maxBytes - batchOverhead
	w.maxRecordBytes = w.producerBytes
	w.keyRequired = topic.compacted
	markers, err := w.ensureTopic(ctx, w.adm, w.cfg.MarkerTopic, markerTopicSpec, "")
	if err != nil {
		return err
	}
	w.markerBytes = markers.maxBytes - batchOverhead
	w.autoTimeout = w.adm.autoTimeout()
	if w.cfg.DLQTopic != "" {
		dlq, err := w.ensureTopic(ctx, w.adm, w.cfg.DLQTopic, w.cfg.CreateTopic, "set create_topic")
		if err != nil {
			return err
		}
		w.dlqKeyRequired = dlq.compacted
		if w.dlq, err = w.newPipe(dlq.maxBytes-batchOverhead, "", 0); err != nil {
			return err
		}
	}
	if lvl, ok := w.cfg.compatibility(); ok && w.registry != nil {
		if err := w.registry.SetCompatibility(ctx, lvl); err != nil {
			return registryError(err)
		}
	}
	w.mu.Lock()
	w.opened = true
	w.mu.Unlock()
	if w.cfg.TLS != nil && w.cfg.TLS.InsecureSkipVerify {
		w.log.Warn("kafka tls.insecure_skip_verify is set: any broker certificate is accepted, so the connection can be intercepted", "brokers", w.cfg.Brokers)
	}
	if w.keyRequired && w.cfg.KeyColumn == "" {
		w.log.Warn("kafka topic is compacted and key_column is not set: the broker refuses keyless records, so every record is refused (or sent to dlq_topic)", "topic", w.cfg.Topic)
	}
	w.log.Info("kafka sink opened", "topic", w.cfg.Topic, "partitions", topic.partitions, "max_message_bytes", topic.maxBytes, "compacted", topic.compacted, "format", w.cfg.Format, "envelope", w.cfg.Envelope)
	return nil
}

// newPipe starts an idempotent AsyncProducer (transactional when txnID is
// set, with txnTimeout) whose batches stay under maxBytes.
func (w *Writer) newPipe(maxBytes int, txnID string, txnTimeout time.Duration) (*pipe, error) {
	c, err := w.producerConfig(maxBytes, txnID, txnTimeout)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewAsyncProducer(w.cfg.Brokers, c)
	if err != nil {
		return nil, w.brokerError(fmt.Errorf("start producer: %w", err))
	}
	return newPipe(p), nil
}

// Check probes the brokers, the topic (and the DLQ topic) and, for Avro,
// the registry, without producing or creating anything. It may be called
// before Open.
func (w *Writer) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	adm, err := w.newAdmin()
	if err != nil {
		return err
	}
	defer adm.close()
	for _, t := range []string{w.cfg.Topic, w.cfg.DLQTopic} {
		if t == "" {
			continue
		}
		_, ok, err := w.describeTopic(adm, t)
		if err != nil {
			return err
		}
		if !ok && w.cfg.CreateTopic == nil {
			return writers.Errorf(writers.ErrNotFound, "kafka: topic %q does not exist: create it, or set create_topic", t)
		}
	}
	if w.registry != nil {
		if err := w.registry.Probe(ctx); err != nil {
			return registryError(err)
		}
	}
	return nil
}

// Close aborts the transactions of open auto-commit streams, stops the
// producers and clients, and discards what is staged but not
// precommitted. Precommitted staging files of transactions stay: a
// restarted server commits them. Close is idempotent.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.m.registered.Unregister()
	stages := w.stages
	w.stages = map[writers.TxnKey]*stage{}
	w.mu.Unlock()
	var errs []error
	for key, st := range stages {
		if st.sw != nil {
			errs = append(errs, st.sw.discard())
		}
		if key.Auto && st.desc != nil {
			errs = append(errs, removeIfExists(st.desc.path))
		}
		w.abortAuto(ctx, st, true)
	}
	w.aborts.Wait()
	w.closeTxns(ctx)
	w.closeAutoPool(ctx)
	if w.dlq != nil {
		if err := w.dlq.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kafka: close producer: %w", err))
		}
	}
	w.closeClients()
	return joinErrs(errs)
}

func (w *Writer) closeClients() {
	if w.adm != nil {
		w.adm.close()
	}
}

// cleanStaging creates the staging folder and removes the staging files
// nobody can commit any more: *.open files (a crash left them before
// precommit) and every file of an auto-commit stream (such a stream never
// outlives its process; only transactions are journaled).
func (w *Writer) cleanStaging() error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return writers.Errorf(writers.ErrUnavailable, "kafka: create staging folder: %w (check data_dir)", err)
	}
	var dead []string
	for _, pattern := range []string{"*.open", autoPrefix + "*"} {
		m, err := filepath.Glob(filepath.Join(w.dir, pattern))
		if err != nil {
			return err
		}
		dead = append(dead, m...)
	}
	removed := 0
	for _, f := range dead {
		if err := removeIfExists(f); err != nil {
			return err
		}
		removed++
	}
	if removed > 0 {
		w.log.Info("kafka sink removed staging files no transaction can commit", "files", removed)
	}
	return nil
}

// autoPrefix starts the staging file names of auto-commit streams.
const autoPrefix = "auto-"

// stageName is the file name of key's staging file without suffix:
// deterministic, so Rollback finds it after a restart.
func stageName(key writers.TxnKey) string {
	sum := sha256.Sum256([]byte(key.Writer))
	if key.Auto {
		return autoPrefix + hex.EncodeToString(sum[:12])
	}
	return "txn-" + hex.EncodeToString(sum[:12]) + "-" + strconv.FormatInt(key.Epoch, 10)
}

func (w *Writer) stagePath(key writers.TxnKey, suffix string) string {
	return filepath.Join(w.dir, stageName(key)+suffix)
}

// stageOf returns key's stage, creating it when create is set.
func (w *Writer) stageOf(key writers.TxnKey, create bool) (*stage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.opened {
		return nil, w.notOpen()
	}
	st := w.stages[key]
	if st == nil && create {
		st = &stage{enc: newEncoder(w)}
		w.stages[key] = st
	}
	return st, nil
}

func (w *Writer) forget(key writers.TxnKey) {
	w.mu.Lock()
	delete(w.stages, key)
	w.mu.Unlock()
}

// Write serializes rec (borrowed) into final records: a batch goes out
// whole or not at all. A transaction stages them in its staging file. An
// auto-commit stream sends them in its Kafka transaction (begun at its
// first record) as they are encoded, blocking while autoInflightBytes of
// its records are unacknowledged, and stages only records bound for the
// dead-letter topic; a batch that fails fails the stream, whose
// transaction is aborted.
// Errors: ErrInvalid (a type the format cannot carry, a bad key, an empty
// upsert key, a null key for a compacted topic without dlq_topic),
// ErrExhausted (a record above the topic's limit without
// dlq_topic), ErrUnavailable (disk, registry, an auto-commit stream whose
// records failed: it is aborted and every later call on it fails).
func (w *Writer) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	st, err := w.stageOf(key, true)
	if err != nil {
		return err
	}
	if st.desc != nil {
		return writers.Errorf(writers.ErrWrongState, "kafka: %s is already precommitted: write under a new epoch", key)
	}
	if st.failed != nil {
		return st.failed
	}
	if st.auto != nil && st.auto.d.failures() > 0 {
		return w.failAuto(ctx, st, nil)
	}
	if !key.Auto || w.cfg.Envelope == EnvelopeUpsert {
		return w.write(ctx, key, st, rec, 0)
	}
	// Sent as it is encoded, a chunk at a time: the producer drains one
	// chunk while the next is encoded, where a whole batch encoded first
	// would leave it idle meanwhile. The stream's transaction still
	// publishes the stream whole or not at all.
	n := rec.NumRows()
	for lo := int64(0); lo < n; lo += autoChunkRows {
		part := rec.NewSlice(lo, min(lo+autoChunkRows, n))
		err := w.write(ctx, key, st, part, int(lo))
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// autoChunkRows is how many rows of an auto-commit stream's batch are
// encoded before they are sent: about what the producer's input channel
// holds (producerConfig's ChannelBufferSize).
const autoChunkRows = 4096

// write serializes rec (borrowed), rows from row first of the batch on,
// into final records, staged or sent (Write).
func (w *Writer) write(ctx context.Context, key writers.TxnKey, st *stage, rec arrow.RecordBatch, first int) error {
	st.frames, st.msgs = st.frames[:0], st.msgs[:0]
	staged := 0
	st.enc.first = first
	n, err := st.enc.encode(ctx, rec, func(r record) {
		if key.Auto && !r.dlq {
			r.key, r.value = st.keep(r.key), st.keep(r.value)
			st.msgs = append(st.msgs, st.message(w.cfg.Topic, r, int(rec.NumRows())))
			return
		}
		st.frames = appendFrame(st.frames, r)
		staged++
	})
	st.arena = nil // the stage must not pin the messages of this batch
	if err != nil || n == 0 {
		return err
	}
	if staged > 0 {
		if st.sw == nil {
			if st.sw, err = createStage(w.stagePath(key, ".open")); err != nil {
				return err
			}
		}
		if err := st.sw.append(st.frames, staged); err != nil {
			return err
		}
		w.m.staged.Add(float64(staged))
	}
	return w.sendAuto(ctx, st)
}

// Precommit closes key's staging file (fsync'd for transactions) and
// returns its descriptor; again, it returns the same descriptor. For an
// auto-commit stream it first waits for the delivery report of every
// record sent: a failure aborts the stream's transaction and fails it.
func (w *Writer) Precommit(ctx context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	st, err := w.stageOf(key, true)
	if err != nil {
		return nil, err
	}
	if err := w.checkMarker(key); err != nil {
		return nil, err
	}
	if st.failed != nil {
		return nil, st.failed
	}
	if st.desc == nil {
		d := descriptor{Endpoint: w.env.Endpoint}
		if st.auto != nil {
			if err := w.flushAuto(ctx, st); err != nil {
				return nil, err
			}
			d.Produced = st.auto.sent
		}
		if st.sw != nil {
			final := w.stagePath(key, stageSuffix)
			if err := st.sw.finish(final, !key.Auto); err != nil {
				return nil, err
			}
			d.File, d.path = stageName(key)+stageSuffix, final
			d.Size, d.CRC, d.Records = st.sw.size, st.sw.crc, st.sw.records
			st.sw = nil
		}
		st.desc = &d
	}
	return st.desc.encode(), nil
}

// Rollback discards key's staging file, open or precommitted (also one a
// previous process precommitted), and aborts an auto-commit stream's
// transaction. Idempotent.
func (w *Writer) Rollback(ctx context.Context, key writers.TxnKey) error {
	w.mu.Lock()
	st := w.stages[key]
	delete(w.stages, key)
	w.mu.Unlock()
	var errs []error
	if st != nil {
		if st.sw != nil {
			errs = append(errs, st.sw.discard())
		}
		w.abortAuto(ctx, st, true)
	}
	errs = append(errs, removeIfExists(w.stagePath(key, stageSuffix)))
	return joinErrs(errs)
}
