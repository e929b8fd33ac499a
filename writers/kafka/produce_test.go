package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// heldProducer is an AsyncProducer whose delivery reports the test sends.
type heldProducer struct {
	sarama.AsyncProducer // unused methods
	in                   chan *sarama.ProducerMessage
	succ                 chan *sarama.ProducerMessage
	errs                 chan *sarama.ProducerError
}

func (h *heldProducer) Input() chan<- *sarama.ProducerMessage     { return h.in }
func (h *heldProducer) Successes() <-chan *sarama.ProducerMessage { return h.succ }
func (h *heldProducer) Errors() <-chan *sarama.ProducerError      { return h.errs }
func (h *heldProducer) AsyncClose()                               { close(h.succ); close(h.errs) }

// TestSendBlocksOnInflightBudget: with a budget, send blocks while the
// unreported bytes would exceed it, and a delivery report frees room.
func TestSendBlocksOnInflightBudget(t *testing.T) {
	h := &heldProducer{in: make(chan *sarama.ProducerMessage, 10), succ: make(chan *sarama.ProducerMessage), errs: make(chan *sarama.ProducerError)}
	pp := newPipe(h)
	t.Cleanup(func() {
		if err := pp.close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	d := newBudgetedDelivery(100)
	msg := func() *sarama.ProducerMessage {
		return &sarama.ProducerMessage{Key: sarama.ByteEncoder(make([]byte, 10)), Value: sarama.ByteEncoder(make([]byte, 50))}
	}
	ctx := context.Background()
	first := msg()
	if err := pp.send(ctx, d, first); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := pp.send(short, d, msg()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send beyond the budget: %v, want it blocked until the deadline", err)
	}
	h.succ <- <-h.in // the first message is acknowledged
	long, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pp.send(long, d, msg()); err != nil {
		t.Fatalf("send after a report freed the budget: %v", err)
	}
	// A message larger than the whole budget still goes, alone.
	h.succ <- <-h.in
	if err := pp.send(long, d, &sarama.ProducerMessage{Value: sarama.ByteEncoder(make([]byte, 500))}); err != nil {
		t.Fatalf("send of a message above the budget: %v", err)
	}
	h.succ <- <-h.in
	d.seal()
	if err := d.wait(long); err != nil {
		t.Fatal(err)
	}
	if acked, failed := d.result(); acked != 3 || len(failed) != 0 {
		t.Fatalf("acked %d, failed %d; want 3 and 0", acked, len(failed))
	}
}

// TestInstanceIDIsStable: a data_dir keeps its instance id across
// restarts; another data_dir gets another.
func TestInstanceIDIsStable(t *testing.T) {
	a, b := &Writer{dir: t.TempDir()}, &Writer{dir: t.TempDir()}
	first, err := a.loadInstance()
	if err != nil || first == "" {
		t.Fatalf("loadInstance: %q, %v", first, err)
	}
	again, err := a.loadInstance()
	if err != nil || again != first {
		t.Fatalf("second loadInstance: %q, %v; want %q", again, err, first)
	}
	if other, err := b.loadInstance(); err != nil || other == first {
		t.Fatalf("another data_dir: %q, %v; want an id other than %q", other, err, first)
	}
}
