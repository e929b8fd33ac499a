package kafka

import (
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// Producer timing. Every record handed to sarama gets its final report
// (acknowledged or failed) within retryBudget: it is tried at most
// retryMax+1 times, and each attempt takes at most a metadata refresh, a
// dial, a write and a read (the read outlasts the broker's own ack
// timeout), plus a backoff. A commit waits deliveryWait, a little longer,
// so that when it answers "nothing was published" sarama has really given
// up on every record: none of them can still be delivered after the
// answer.
const (
	dialTimeout     = 2 * time.Second
	writeTimeout    = 2 * time.Second
	ackTimeout      = 4 * time.Second // Producer.Timeout: the broker's wait for in-sync replicas
	netReadTimeout  = 6 * time.Second // above ackTimeout, so a slow ack is not a dead connection
	metadataTimeout = 4 * time.Second
	retryMax        = 2 // at least 1 with the idempotent producer
	retryBackoff    = 250 * time.Millisecond

	// writerTxnTimeout is the transaction timeout of a writer's commits
	// (sarama's default): a commit produces its staged records at once.
	writerTxnTimeout = time.Minute

	retryBudget  = (retryMax + 1) * (metadataTimeout + dialTimeout + writeTimeout + netReadTimeout + retryBackoff)
	deliveryWait = retryBudget + 3*time.Second
)

// netConfig is the configuration every client of the sink starts from:
// the brokers' TLS and SASL settings (ClientConfig; a password file is
// read again, so a rotated password reaches new clients) and the network
// timing above.
func (w *Writer) netConfig() (*sarama.Config, error) {
	c, err := w.cfg.ClientConfig()
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "kafka: %w", err)
	}
	c.Net.DialTimeout = dialTimeout
	c.Net.WriteTimeout = writeTimeout
	c.Net.ReadTimeout = netReadTimeout
	c.Metadata.Timeout = metadataTimeout
	c.Metadata.Retry.Max = 2
	c.Metadata.Retry.Backoff = retryBackoff
	// Open creates the topics it needs (create_topic); a metadata request
	// must never create one with the broker's defaults.
	c.Metadata.AllowAutoTopicCreation = false
	return c, nil
}

// producerConfig is the producer configuration of docs/kafka.md (idempotent,
// acks=all, one request in flight) with
// the timing above; txnID makes it transactional, with transactions the
// broker aborts txnTimeout after their first record.
func (w *Writer) producerConfig(maxBytes int, txnID string, txnTimeout time.Duration) (*sarama.Config, error) {
	c, err := w.netConfig()
	if err != nil {
		return nil, err
	}
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Timeout = ackTimeout
	c.Producer.Retry.Max = retryMax
	c.Producer.Retry.BackoffFunc = spacedBackoff()
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = partitioner(w.cfg.Partitioner, w.cfg.StickyBatchSize)
	c.Producer.MaxMessageBytes = maxBytes
	c.Producer.Compression = codec(w.cfg.Compression)
	c.ChannelBufferSize = 4096
	if txnID != "" {
		c.Producer.Transaction.ID = txnID
		c.Producer.Transaction.Timeout = txnTimeout
		// EndTxn and AddPartitionsToTxn retry 50 times by default: bound
		// them like the records, so a commit's answer comes in time.
		c.Producer.Transaction.Retry.Max = retryMax
		c.Producer.Transaction.Retry.Backoff = retryBackoff
	}
	return c, nil
}

// spacedBackoff is a Retry.BackoffFunc that sleeps retryBackoff at most
// once per two retryBackoff periods of one producer. sarama also sleeps
// the backoff after failing each queued record of a partition whose leader
// it cannot find (async_producer.go, updateLeaderIfBrokerProducerIsNil),
// so with Kafka down N queued records would take N × backoff to fail: far
// beyond retryBudget. Spaced, they fail at once, while retries after a
// leader change still wait a backoff (and the metadata refresh).
func spacedBackoff() func(retries, maxRetries int) time.Duration {
	var mu sync.Mutex
	var next time.Time // no sleep before
	return func(int, int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if now.Before(next) {
			return 0
		}
		next = now.Add(2 * retryBackoff)
		return retryBackoff
	}
}

func codec(name string) sarama.CompressionCodec {
	switch name {
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}
