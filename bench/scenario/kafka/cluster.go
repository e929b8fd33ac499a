package kafka

import (
	"context"
	"fmt"
	"io"
	"slices"
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

// parseBrokers reads --broker: one broker name, or the real broker's two
// listeners together ("kafka,kafka-sasl_ssl"), measured in one run on one
// broker process so that their ratio is not the machine's drift between
// runs.
func parseBrokers(s string) ([]string, error) {
	names := strings.Split(s, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		if !slices.Contains(brokerNames, names[i]) {
			return nil, fmt.Errorf("--broker %q: want one of %s, or %s,%s", n, strings.Join(brokerNames, ", "), brokerKafka, brokerSASLSSL)
		}
	}
	if both := []string{brokerKafka, brokerSASLSSL}; len(names) > 1 && !slices.Equal(slices.Sorted(slices.Values(names)), both) {
		return nil, fmt.Errorf("--broker %q: only the real broker's listeners combine (%s,%s)", s, brokerKafka, brokerSASLSSL)
	}
	return names, nil
}

// cluster is the broker of a run: listeners say how the sink and the
// baselines connect to it (brokers, TLS, SASL), one per --broker name;
// admin is a PLAINTEXT client for topic creation and truncation.
type cluster struct {
	listeners []listener
	admin     *kadm.Client
	meter     meter // with the broker's process, when it has one
	close     func()
}

// listener is one way of connecting to the broker, named as --broker
// names it.
type listener struct {
	name string
	sec  *sink.Config
}

// startCluster starts the broker that names (parseBrokers) connect to,
// with topics of partitions partitions.
func startCluster(ctx context.Context, names []string, topics []string, log io.Writer) (*cluster, error) {
	var plain []string
	var stop func()
	var broker *realkafka.Broker
	if names[0] == brokerKfake {
		c, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: partitions, Topics: topics})
		if err != nil {
			return nil, err
		}
		plain, stop = c.Addrs(), c.Close
	} else {
		fmt.Fprintf(log, "kafka: starting Apache Kafka %s\n", realkafka.Version)
		b, err := realkafka.Start()
		if err != nil {
			return nil, err
		}
		broker, plain, stop = b, []string{b.Plain}, b.Stop
	}
	c := &cluster{close: stop}
	if broker != nil {
		c.meter.brokerPid = broker.Pid()
	}
	for _, n := range names {
		sec := sink.NewConfig()
		sec.Brokers = plain
		if n == brokerSASLSSL {
			sec.Brokers = []string{broker.SASLSSL}
			sec.TLS = &sink.TLS{CAFile: broker.CAFile}
			sec.SASL = &sink.SASL{Mechanism: sink.MechanismSCRAMSHA512, Username: realkafka.User, Secret: sink.Secret{PasswordFile: broker.PasswordFile}}
		}
		c.listeners = append(c.listeners, listener{name: n, sec: sec})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain...))
	if err != nil {
		stop()
		return nil, err
	}
	c.admin, c.close = kadm.NewClient(cl), func() { cl.Close(); stop() }
	if broker != nil {
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
func (l listener) yaml() string {
	s := fmt.Sprintf("brokers: [%q]", l.sec.Brokers[0])
	if l.sec.TLS != nil {
		s += fmt.Sprintf(", tls: {ca_file: %q}", l.sec.TLS.CAFile)
	}
	if a := l.sec.SASL; a != nil {
		s += fmt.Sprintf(", sasl: {mechanism: %s, username: %s, password_file: %q}", a.Mechanism, a.Username, a.PasswordFile)
	}
	return s
}

// saramaConfig is the sink's own client configuration (TLS, SASL), which
// the bare sarama baseline starts from.
func (l listener) saramaConfig() (*sarama.Config, error) { return l.sec.ClientConfig() }

// franzOpts connects a franz-go client as the sink connects (same TLS
// settings and credentials; SCRAM-SHA-512 is the one mechanism --broker
// uses).
func (l listener) franzOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(l.sec.Brokers...)}
	sc, err := l.saramaConfig()
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
