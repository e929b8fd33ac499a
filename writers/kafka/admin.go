package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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

// newAdmin returns a franz-go client for metadata, configs and reads.
func (w *Writer) newAdmin(opts ...kgo.Opt) (*kgo.Client, error) {
	// kgo answers metadata requests from a cache younger than the min
	// age (5 s by default); a topic just created must show at once.
	base := []kgo.Opt{kgo.SeedBrokers(w.cfg.Brokers...), kgo.MetadataMinAge(50 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "kafka: brokers %v: %w", w.cfg.Brokers, err)
	}
	return cl, nil
}

// topicInfo describes an existing topic.
type topicInfo struct {
	partitions int
	maxBytes   int  // max.message.bytes
	compacted  bool // cleanup.policy includes compact: the broker refuses keyless records
}

// describeTopic returns topic's partition count, message size limit and
// whether it is compacted; ok is false when the topic does not exist.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (info topicInfo, ok bool, err error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return info, false, unreachable(err)
	}
	td, found := tds[topic]
	if !found || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return info, false, nil
	}
	if td.Err != nil {
		return info, false, writers.Errorf(writers.ErrUnavailable, "kafka: metadata of topic %q: %w", topic, td.Err)
	}
	info.partitions = len(td.Partitions)
	info.maxBytes = defaultMaxMessageBytes
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return info, false, unreachable(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			switch c.Key {
			case "max.message.bytes":
				v, err := strconv.Atoi(*c.Value)
				if err != nil {
					continue
				}
				if v <= batchOverhead {
					return info, false, writers.Errorf(writers.ErrInvalid, "kafka: topic %q: max.message.bytes %d leaves no room for a record after the %d-byte batch header: raise it", topic, v, batchOverhead)
				}
				info.maxBytes = v
			case "cleanup.policy":
				info.compacted = slices.ContainsFunc(strings.Split(*c.Value, ","), func(p string) bool { return strings.TrimSpace(p) == "compact" })
			}
		}
	}
	return info, true, nil
}

// ensureTopic describes topic, creating it first when it is missing and
// create is set. A missing topic without create is ErrNotFound.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, create *CreateTopic, hint string) (topicInfo, error) {
	info, ok, err := describeTopic(ctx, adm, topic)
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
	resp, err := adm.CreateTopic(ctx, create.Partitions, create.ReplicationFactor, configs, topic)
	if err != nil {
		return info, unreachable(err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return info, writers.Errorf(writers.ErrInvalid, "kafka: create topic %q: %w %s (check create_topic)", topic, resp.Err, resp.ErrMessage)
	}
	// A created topic reaches every broker's metadata a little later.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, ok, err = describeTopic(ctx, adm, topic)
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

// unreachable classifies a failed broker request. A request the caller
// cancelled stays a cancellation: Kafka may well be up.
func unreachable(err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("kafka: broker request: %w", err)
	}
	return writers.Errorf(writers.ErrUnavailable, "kafka: brokers unreachable: %w (check brokers and that Kafka is up)", err)
}

// markerTopicSpec creates the marker topic: one partition, compacted, the
// broker's default replication factor.
var markerTopicSpec = &CreateTopic{Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "compact"}}
