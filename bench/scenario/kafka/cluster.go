package kafka

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/quiver-ingest/quiver/internal/devbroker"
	"github.com/quiver-ingest/quiver/internal/realkafka"
	sink "github.com/quiver-ingest/quiver/writers/kafka"
)

// The brokers --broker chooses from.
const (
	brokerKfake   = "kfake"          // internal/devbroker in process
	brokerKafka   = "kafka"          // a real Apache Kafka broker (internal/realkafka), PLAINTEXT
	brokerSASLSSL = "kafka-sasl_ssl" // the same over its SASL_SSL listener, SCRAM-SHA-512
)

var brokerNames = []string{brokerKfake, brokerKafka, brokerSASLSSL}

// cluster is the broker of a run: sec describes how the sink and the
// baselines connect to it (brokers, TLS, SASL), admin is a PLAINTEXT
// client for topic creation and truncation.
type cluster struct {
	sec   *sink.Config
	admin *kadm.Client
	close func()
}

// startCluster starts the broker named by name with topics of partitions
// partitions.
func startCluster(ctx context.Context, name string, topics []string, log io.Writer) (*cluster, error) {
	sec := sink.NewConfig()
	var plain []string
	var stop func()
	switch name {
	case brokerKfake:
		c, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: partitions, Topics: topics})
		if err != nil {
			return nil, err
		}
		plain, stop = c.Addrs(), c.Close
	case brokerKafka, brokerSASLSSL:
		fmt.Fprintf(log, "kafka: starting Apache Kafka %s\n", realkafka.Version)
		b, err := realkafka.Start()
		if err != nil {
			return nil, err
		}
		plain, stop = []string{b.Plain}, b.Stop
		if name == brokerSASLSSL {
			sec.Brokers = []string{b.SASLSSL}
			sec.TLS = &sink.TLS{CAFile: b.CAFile}
			sec.SASL = &sink.SASL{Mechanism: sink.MechanismSCRAMSHA512, Username: realkafka.User, Secret: sink.Secret{PasswordFile: b.PasswordFile}}
		}
	default:
		return nil, fmt.Errorf("--broker %q: want one of %s", name, strings.Join(brokerNames, ", "))
	}
	if sec.Brokers == nil {
		sec.Brokers = plain
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain...))
	if err != nil {
		stop()
		return nil, err
	}
	c := &cluster{sec: sec, admin: kadm.NewClient(cl), close: func() { cl.Close(); stop() }}
	if name != brokerKfake {
		resp, err := c.admin.CreateTopics(ctx, partitions, 1, nil, topics...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			c.close()
			return nil, fmt.Errorf("create topics: %w", err)
		}
	}
	return c, nil
}

// yaml is the endpoint's kafka keys for the brokers and their security.
func (c *cluster) yaml() string {
	s := fmt.Sprintf("brokers: [%q]", c.sec.Brokers[0])
	if c.sec.TLS != nil {
		s += fmt.Sprintf(", tls: {ca_file: %q}", c.sec.TLS.CAFile)
	}
	if a := c.sec.SASL; a != nil {
		s += fmt.Sprintf(", sasl: {mechanism: %s, username: %s, password_file: %q}", a.Mechanism, a.Username, a.PasswordFile)
	}
	return s
}

// saramaConfig is the sink's own client configuration (TLS, SASL), which
// the bare sarama baseline starts from.
func (c *cluster) saramaConfig() (*sarama.Config, error) { return c.sec.ClientConfig() }

// franzOpts connects a franz-go client as the sink connects (same TLS
// settings and credentials; SCRAM-SHA-512 is the one mechanism --broker
// uses).
func (c *cluster) franzOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.sec.Brokers...)}
	sc, err := c.saramaConfig()
	if err != nil {
		return nil, err
	}
	if sc.Net.TLS.Enable {
		opts = append(opts, kgo.DialTLSConfig(sc.Net.TLS.Config.Clone()))
	}
	if sc.Net.SASL.Enable {
		opts = append(opts, kgo.SASL(scram.Auth{User: sc.Net.SASL.User, Pass: sc.Net.SASL.Password}.AsSha512Mechanism()))
	}
	return opts, nil
}
