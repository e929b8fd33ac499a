// Package devbroker runs an in-process Kafka cluster
// (github.com/twmb/franz-go/pkg/kfake) for development and tests: the
// `embedded_kafka` section of the server config, and the brokers the Kafka
// sink's tests produce to. kfake speaks the real wire protocol (idempotent
// and transactional produce, read_committed fetch, topic configs,
// compaction), so sarama, franz-go and kcat talk to it unchanged; it keeps
// everything in memory and has no replication (docs/kafka.md).
//
// The package imports only kfake; it knows nothing of sinks or the server.
package devbroker

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configure a Cluster. The zero value is one broker on a random
// 127.0.0.1 port, 3 partitions per created topic.
type Options struct {
	// Listen is the host:port of the single broker; "" or a port of 0
	// picks a free port on 127.0.0.1.
	Listen string
	// Brokers is the number of brokers; 0 means 1. More than one broker
	// requires a port of 0 (each broker gets its own random port).
	Brokers int
	// Partitions is the partition count of topics created without one
	// (auto-created or CreateTopics with -1); 0 means 3.
	Partitions int
	// Topics are created at start with Partitions partitions.
	Topics []string
	// Configs are broker configs (message.max.bytes,
	// log.cleaner.backoff.ms, ...).
	Configs map[string]string
}

// Cluster is a running embedded cluster. Close it exactly once.
type Cluster struct {
	*kfake.Cluster
}

// defaultCleanerBackoff makes compaction run by itself about once a second,
// as a developer expects of a compacted topic; kfake's default (Kafka's) is
// an hour.
const defaultCleanerBackoff = "1000"

// Start starts a cluster. Topics producers name are created on first use
// (auto topic creation is on), as a developer broker should.
func Start(o Options) (*Cluster, error) {
	if o.Brokers == 0 {
		o.Brokers = 1
	}
	if o.Partitions == 0 {
		o.Partitions = 3
	}
	port := 0
	if o.Listen != "" {
		host, p, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded kafka: listen %q: %w (use host:port)", o.Listen, err)
		}
		if host != "" && host != "127.0.0.1" && host != "localhost" {
			return nil, fmt.Errorf("embedded kafka: listen %q: the embedded broker only binds 127.0.0.1", o.Listen)
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("embedded kafka: listen %q: port %q is not a number", o.Listen, p)
		}
	}
	if port != 0 && o.Brokers > 1 {
		return nil, fmt.Errorf("embedded kafka: %d brokers need random ports: use a listen port of 0", o.Brokers)
	}
	configs := map[string]string{"log.cleaner.backoff.ms": defaultCleanerBackoff}
	for k, v := range o.Configs {
		configs[k] = v
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(o.Brokers),
		kfake.DefaultNumPartitions(o.Partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.BrokerConfigs(configs),
	}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.Partitions), o.Topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: start on %s: %w (is the port taken? change embedded_kafka.listen)", o.Listen, err)
	}
	return &Cluster{Cluster: c}, nil
}

// Addrs returns the brokers' host:port addresses.
func (c *Cluster) Addrs() []string { return c.ListenAddrs() }
