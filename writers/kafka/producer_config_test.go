package kafka

import (
	"testing"
	"time"
)

// TestProducerTimingIsConsistent: a commit outwaits sarama's whole retry
// budget, so its "nothing was published" is final; the producer configs
// the sink uses are valid for sarama.
func TestProducerTimingIsConsistent(t *testing.T) {
	if retryBudget >= deliveryWait {
		t.Fatalf("retry budget %s is not below the delivery wait %s", retryBudget, deliveryWait)
	}
	if netReadTimeout <= ackTimeout {
		t.Fatalf("read timeout %s must exceed the broker's ack timeout %s", netReadTimeout, ackTimeout)
	}
	w := &Writer{cfg: NewConfig()}
	for _, txnID := range []string{"", "quiver/ep/job"} {
		c, err := w.producerConfig(1<<20, txnID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("producer config (transactional id %q): %v", txnID, err)
		}
		if c.Producer.Retry.Max != retryMax || c.Producer.Retry.BackoffFunc == nil || c.Net.ReadTimeout != netReadTimeout || c.Metadata.Timeout != metadataTimeout {
			t.Fatalf("producer config (transactional id %q) does not use the budgeted timing", txnID)
		}
	}
}
