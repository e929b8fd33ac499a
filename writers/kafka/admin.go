package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// batchOverhead is left below a topic's max.message.bytes for the record
// batch header (61 bytes) when sizing sarama's Producer.MaxMessageBytes,
// which caps whole batches: a batch then never exceeds the topic's limit,
// and only a record that is itself too large is refused (docs/kafka.md,
// "Dead-letter topic").
const batchOverhead = 100

// defaultMaxMessageBytes is Kafka's message.max.bytes default, used when a
// broker does not report the topic's setting.
const defaultMaxMessageBytes = 1048588

// admin is the sink's sarama client for metadata, configs, topic
// creation and the marker reads, on the same TLS and SASL settings as its
// producers.
type admin struct {
	cl  sarama.Client
	adm sarama.ClusterAdmin
}

// newAdmin connects an admin client to the brokers. A refused handshake
// or authentication is ErrUnauthenticated, anything else ErrUnavailable.
func (w *Writer) newAdmin() (*admin, error) {
	c, err := w.netConfig()
	if err != nil {
		return nil, err
	}
	c.Admin.Timeout = openTimeout
	c.Admin.Retry.Max = 2
	c.Admin.Retry.Backoff = retryBackoff
	cl, err := sarama.NewClient(w.cfg.Brokers, c)
	if err != nil {
		return nil, w.brokerError(err)
	}
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		cl.Close()
		return nil, w.brokerError(err)
	}
	return &admin{cl: cl, adm: adm}, nil
}

// close closes the admin and its client.
func (a *admin) close() { a.adm.Close() }

// describe returns the configuration of one resource (a topic, a broker),
// its own error included.
func (a *admin) describe(res sarama.ConfigResource) ([]sarama.ConfigEntry, error) {
	results, err := a.adm.DescribeConfigs([]*sarama.ConfigResource{&res}, sarama.DescribeConfigsOptions{})
	switch {
	case err != nil:
		return nil, err
	case len(results) != 1:
		return nil, fmt.Errorf("kafka: describe configs of %q: %d results for one resource", res.Name, len(results))
	case !errors.Is(results[0].ErrorCode, sarama.ErrNoError):
		if results[0].ErrorMsg != "" {
			return nil, fmt.Errorf("kafka: describe configs of %q: %w: %s", res.Name, results[0].ErrorCode, results[0].ErrorMsg)
		}
		return nil, fmt.Errorf("kafka: describe configs of %q: %w", res.Name, results[0].ErrorCode)
	}
	return results[0].Configs, nil
}

// topicPartitions returns topic's id and partitions, as the cluster's
// controller knows them now.
func (a *admin) topicPartitions(topic string) (sarama.Uuid, []int32, error) {
	mds, err := a.adm.DescribeTopics([]string{topic})
	if err != nil {
		return sarama.Uuid{}, nil, err
	}
	i := slices.IndexFunc(mds, func(md *sarama.TopicMetadata) bool { return md.Name == topic })
	switch {
	case i < 0:
		return sarama.Uuid{}, nil, sarama.ErrUnknownTopicOrPartition
	case !errors.Is(mds[i].Err, sarama.ErrNoError):
		return sarama.Uuid{}, nil, mds[i].Err
	}
	parts := make([]int32, len(mds[i].Partitions))
	for j, p := range mds[i].Partitions {
		parts[j] = p.ID
	}
	slices.Sort(parts)
	return mds[i].Uuid, parts, nil
}

// topicInfo describes an existing topic.
type topicInfo struct {
	partitions int
	maxBytes   int  // max.message.bytes
	compacted  bool // cleanup.policy includes compact: the broker refuses keyless records
}

// describeTopic returns topic's partition count, message size limit and
// whether it is compacted; ok is false when the topic does not exist.
func (w *Writer) describeTopic(a *admin, topic string) (info topicInfo, ok bool, err error) {
	mds, err := a.adm.DescribeTopics([]string{topic})
	if err != nil {
		return info, false, w.brokerError(err)
	}
	i := slices.IndexFunc(mds, func(md *sarama.TopicMetadata) bool { return md.Name == topic })
	if i < 0 || errors.Is(mds[i].Err, sarama.ErrUnknownTopicOrPartition) {
		return info, false, nil
	}
	if td := mds[i]; !errors.Is(td.Err, sarama.ErrNoError) {
		return info, false, writers.Errorf(writers.ErrUnavailable, "kafka: metadata of topic %q: %w", topic, td.Err)
	}
	info.partitions = len(mds[i].Partitions)
	info.maxBytes = defaultMaxMessageBytes
	entries, err := a.describe(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return info, false, w.brokerError(err)
	}
	for _, c := range entries {
		switch c.Name {
		case "max.message.bytes":
			v, err := strconv.Atoi(c.Value)
			if err != nil {
				continue
			}
			if v <= batchOverhead {
				return info, false, writers.Errorf(writers.ErrInvalid, "kafka: topic %q: max.message.bytes %d leaves no room for a record after the %d-byte batch header: raise it", topic, v, batchOverhead)
			}
			info.maxBytes = v
		case "cleanup.policy":
			info.compacted = slices.ContainsFunc(strings.Split(c.Value, ","), func(p string) bool { return strings.TrimSpace(p) == "compact" })
		}
	}
	return info, true, nil
}

// ensureTopic describes topic, creating it first when it is missing and
// create is set. A missing topic without create is ErrNotFound.
func (w *Writer) ensureTopic(ctx context.Context, a *admin, topic string, create *CreateTopic, hint string) (topicInfo, error) {
	info, ok, err := w.describeTopic(a, topic)
	if err != nil || ok {
		return info, err
	}
	if create == nil {
		return info, writers.Errorf(writers.ErrNotFound, "kafka: topic %q does not exist: create it, or %s", topic, hint)
	}
	configs := make(map[string]*string, len(create.Configs))
	for k, v := range create.Configs {
		configs[k] = &v
	}
	err = a.adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: create.Partitions, ReplicationFactor: create.ReplicationFactor, ConfigEntries: configs}, false)
	var terr *sarama.TopicError
	switch {
	case err == nil || errors.Is(err, sarama.ErrTopicAlreadyExists):
	case errors.As(err, &terr):
		return info, writers.Errorf(writers.ErrInvalid, "kafka: create topic %q: %w (check create_topic)", topic, err)
	default:
		return info, w.brokerError(err)
	}
	// A created topic reaches every broker's metadata a little later.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, ok, err = w.describeTopic(a, topic)
		if err != nil || ok {
			return info, err
		}
		select {
		case <-ctx.Done():
			return info, writers.Errorf(writers.ErrUnavailable, "kafka: topic %q was created but is not in the metadata yet: retry", topic)
		case <-tick.C:
		}
	}
}

// brokerError classifies a failed broker request: a refused TLS handshake
// or SASL authentication is ErrUnauthenticated (securityError); a request
// the caller cancelled stays a cancellation (Kafka may well be up);
// anything else is ErrUnavailable.
func (w *Writer) brokerError(err error) error {
	if sec, ok := w.cfg.securityError(err); ok {
		return sec
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("kafka: broker request: %w", err)
	}
	return writers.Errorf(writers.ErrUnavailable, "kafka: brokers unreachable: %w (check brokers and that Kafka is up)", err)
}

// markerTopicSpec creates the marker topic: one partition, compacted, the
// broker's default replication factor.
var markerTopicSpec = &CreateTopic{Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "compact"}}
