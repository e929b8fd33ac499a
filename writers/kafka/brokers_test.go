package kafka_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/internal/realkafka"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// cluster is a Kafka cluster the tests run against. Addrs is where the
// independent readers of the tests (franz-go, kcat, a crashed sarama
// producer) connect: a PLAINTEXT listener.
type cluster interface {
	Addrs() []string
	CreateTopic(topic string, partitions int32, configs map[string]string) error
}

// realCluster is the run's Apache Kafka broker (internal/realkafka). With
// a mechanism set the sink connects to its SASL_SSL listener, verifying
// the broker against the test CA and authenticating as realkafka.User;
// otherwise to its PLAINTEXT listener.
type realCluster struct {
	b         *realkafka.Broker
	mechanism string
}

func (c realCluster) Addrs() []string { return []string{c.b.Plain} }

func (c realCluster) CreateTopic(topic string, partitions int32, configs map[string]string) error {
	adm, err := sarama.NewClusterAdmin(c.Addrs(), sarama.NewConfig())
	if err != nil {
		return err
	}
	defer adm.Close()
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: entries}, false)
}

// secure points cfg at the SASL_SSL listener when c has a mechanism.
func (c realCluster) secure(cfg *kafka.Config) {
	if c.mechanism == "" {
		return
	}
	cfg.Brokers = []string{c.b.SASLSSL}
	cfg.TLS = &kafka.TLS{CAFile: c.b.CAFile}
	cfg.SASL = &kafka.SASL{Mechanism: c.mechanism, Username: realkafka.User, Secret: kafka.Secret{PasswordFile: c.b.PasswordFile}}
}

// forEachCluster runs test against kfake (in process), then against a
// real Apache Kafka broker over PLAINTEXT and over SASL_SSL with
// SCRAM-SHA-512: what kfake does not model (transaction coordination and
// fencing, the last stable offset, compacted topics refusing keyless
// records, TLS and SASL) meets the real thing.
func forEachCluster(t *testing.T, test func(t *testing.T, c cluster)) {
	forPlainClusters(t, test)
	t.Run("kafka-sasl_ssl", func(t *testing.T) {
		test(t, realCluster{b: realkafka.ForTest(t), mechanism: kafka.MechanismSCRAMSHA512})
	})
}

// forPlainClusters runs test against kfake and the real broker over
// PLAINTEXT only: for long tests, whose SASL_SSL run would add time and
// no coverage the others do not give.
func forPlainClusters(t *testing.T, test func(t *testing.T, c cluster)) {
	t.Run("kfake", func(t *testing.T) { test(t, startCluster(t)) })
	t.Run("kafka", func(t *testing.T) { test(t, realCluster{b: realkafka.ForTest(t)}) })
}
