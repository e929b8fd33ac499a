package kafka

import (
	"math/rand/v2"
	"sync"

	"github.com/IBM/sarama"
)

// partitioner returns the sarama partitioner of name (Config.Partitioner).
func partitioner(name string, stickyBatch int) sarama.PartitionerConstructor {
	switch name {
	case PartitionRoundRobin:
		return sarama.NewRoundRobinPartitioner
	case PartitionSticky:
		return func(string) sarama.Partitioner { return &stickyPartitioner{batch: stickyBatch} }
	default:
		// Java's default: toPositive(murmur2(key)) % partitions; keyless
		// records go to a random partition.
		return sarama.NewMurmur2Partitioner
	}
}

// stickyPartitioner sends batch records in a row to one partition, then
// moves to the next one, ignoring keys: few, full batches, as Kafka's
// uniform sticky partitioner does. sarama has none.
type stickyPartitioner struct {
	batch int

	mu      sync.Mutex // guards the following fields
	cur     int32
	n       int
	started bool
}

// Partition implements sarama.Partitioner.
func (p *stickyPartitioner) Partition(_ *sarama.ProducerMessage, numPartitions int32) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.started:
		p.cur, p.started = rand.Int32N(numPartitions), true
	case p.n >= p.batch || p.cur >= numPartitions:
		p.cur, p.n = (p.cur+1)%numPartitions, 0
	}
	p.n++
	return p.cur, nil
}

// RequiresConsistency is false: keys do not decide the partition.
func (p *stickyPartitioner) RequiresConsistency() bool { return false }
