package realkafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Settle waits, up to 10 s, until no transaction is open on topic at
// addrs: each partition's last stable offset has reached its high
// watermark. A real broker writes the markers of a transaction after
// EndTxn has answered, so right after a commit its records may not be
// visible to read_committed readers yet (kfake writes them at once). On
// timeout it returns all the same: the caller's assertions tell what is
// visible. It reads with franz-go, a client independent of the sink's.
func Settle(addrs []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		stable, err1 := adm.ListCommittedOffsets(ctx, topic)
		ends, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 == nil && err2 == nil {
			open := false
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := stable.Lookup(topic, o.Partition); !ok || s.Offset < o.Offset {
					open = true
				}
			})
			if !open {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
