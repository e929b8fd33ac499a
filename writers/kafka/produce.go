package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
	"golang.org/x/sync/semaphore"
)

// pipe is a sarama AsyncProducer whose delivery reports are routed to the
// batch that sent each message (msg.Metadata is its *delivery), so several
// commits can share one producer. Close it exactly once.
type pipe struct {
	p    sarama.AsyncProducer
	done chan struct{} // closed when both report channels are drained
}

func newPipe(p sarama.AsyncProducer) *pipe {
	pp := &pipe{p: p, done: make(chan struct{})}
	go pp.route()
	return pp
}

func (pp *pipe) route() {
	defer close(pp.done)
	succ, errs := pp.p.Successes(), pp.p.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			m.Metadata.(*delivery).report(m, nil)
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			e.Msg.Metadata.(*delivery).report(e.Msg, e.Err)
		}
	}
}

// send hands msg to the producer for d, unless ctx ends first. With a
// budget, it first waits until msg fits in d's unreported bytes.
func (pp *pipe) send(ctx context.Context, d *delivery, msg *sarama.ProducerMessage) error {
	_, err := pp.sendAll(ctx, d, []*sarama.ProducerMessage{msg})
	return err
}

// sendAll hands msgs to the producer for d in order, as send does each,
// and returns how many it handed over: all, unless ctx ends first. It
// takes d's budget for a run of messages at once (at most
// budgetChunk of it, or one larger message), not for each.
func (pp *pipe) sendAll(ctx context.Context, d *delivery, msgs []*sarama.ProducerMessage) (int, error) {
	for i := 0; i < len(msgs); {
		j, weight := i, int64(0)
		for j < len(msgs) {
			w := d.weight(msgs[j])
			if j > i && weight+w > d.budgetBytes/budgetChunk {
				break
			}
			weight += w
			j++
		}
		if d.budget != nil {
			if err := d.budget.Acquire(ctx, weight); err != nil {
				return i, err
			}
		}
		d.addN(j - i)
		for k := i; k < j; k++ {
			msgs[k].Metadata = d
			select {
			case pp.p.Input() <- msgs[k]:
			case <-ctx.Done():
				for _, m := range msgs[k:j] {
					d.unsent(m)
				}
				return k, ctx.Err()
			}
		}
		i = j
	}
	return len(msgs), nil
}

// budgetChunk is the share of a delivery's budget sendAll takes at once.
const budgetChunk = 16

// close closes the producer (flushing what is in flight) and waits for the
// last reports, or until ctx ends: with brokers down sarama retries for a
// long time, and then its goroutines finish in the background.
func (pp *pipe) close(ctx context.Context) error {
	pp.p.AsyncClose()
	select {
	case <-pp.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kafka: producer still retrying undelivered records when closed: %w", ctx.Err())
	}
}

// failure is one record the producer did not deliver.
type failure struct {
	msg *sarama.ProducerMessage
	err error
}

// delivery counts the reports of the messages of one batch.
type delivery struct {
	// budget, when set, bounds the bytes of messages sent and not yet
	// reported (budgetBytes): send blocks while it is spent, and each
	// report gives the message's share back. Set before the first send.
	budget      *semaphore.Weighted
	budgetBytes int64

	mu      sync.Mutex // guards the following fields
	pending int
	sealed  bool
	acked   int64
	failed  []failure
	done    chan struct{}
}

func newDelivery() *delivery { return &delivery{done: make(chan struct{})} }

// newBudgetedDelivery returns a delivery whose unreported messages hold at
// most budget bytes.
func newBudgetedDelivery(budget int64) *delivery {
	d := newDelivery()
	d.budget, d.budgetBytes = semaphore.NewWeighted(budget), budget
	return d
}

// weight is msg's share of the budget: its key and value bytes, capped at
// the whole budget so that one large message can still be sent alone.
func (d *delivery) weight(msg *sarama.ProducerMessage) int64 {
	var n int64
	if msg.Key != nil {
		n += int64(msg.Key.Length())
	}
	if msg.Value != nil {
		n += int64(msg.Value.Length())
	}
	return min(max(n, 1), d.budgetBytes)
}

func (d *delivery) release(msg *sarama.ProducerMessage) {
	if d.budget != nil {
		d.budget.Release(d.weight(msg))
	}
}

// addN counts n more messages sent.
func (d *delivery) addN(n int) {
	d.mu.Lock()
	d.pending += n
	d.mu.Unlock()
}

func (d *delivery) unsent(msg *sarama.ProducerMessage) {
	d.release(msg)
	d.mu.Lock()
	d.pending--
	d.finishLocked()
	d.mu.Unlock()
}

func (d *delivery) report(m *sarama.ProducerMessage, err error) {
	d.release(m)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending--
	if err != nil {
		d.failed = append(d.failed, failure{msg: m, err: err})
	} else {
		d.acked++
	}
	d.finishLocked()
}

// seal says no more messages will be sent; wait returns once all reported.
func (d *delivery) seal() {
	d.mu.Lock()
	d.sealed = true
	d.finishLocked()
	d.mu.Unlock()
}

func (d *delivery) finishLocked() {
	if d.sealed && d.pending == 0 {
		select {
		case <-d.done:
		default:
			close(d.done)
		}
	}
}

// wait blocks until every sent message reported or ctx ends.
func (d *delivery) wait(ctx context.Context) error {
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failures returns how many messages failed so far.
func (d *delivery) failures() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.failed)
}

// snapshot returns the counts so far and the messages still unreported.
func (d *delivery) snapshot() (acked int64, failed []failure, pending int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked, append([]failure(nil), d.failed...), d.pending
}

// result returns the counts once wait returned nil.
func (d *delivery) result() (acked int64, failed []failure) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked, d.failed
}

// scope is who a producer error is about (after the seed's policy).
type scope int

const (
	// scopeRecord: the broker or sarama refused this record for its own
	// sake (too large, invalid, corrupt); retrying it fails again. Such
	// records go to the dead-letter topic.
	scopeRecord scope = iota
	// scopeInfra: brokers unreachable, leaders moving, timeouts; retrying
	// later may succeed.
	scopeInfra
	// scopeSink: anything else (authorization, fencing, unknown codes);
	// it fails closed and is not retryable.
	scopeSink
)

// classify sorts a producer error into its scope.
func classify(err error) scope {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		switch kerr {
		case sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidRecord, sarama.ErrInvalidMessage,
			sarama.ErrInvalidTimestamp:
			return scopeRecord
		case sarama.ErrUnknownTopicOrPartition, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition,
			sarama.ErrRequestTimedOut, sarama.ErrBrokerNotAvailable, sarama.ErrReplicaNotAvailable,
			sarama.ErrNetworkException, sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend,
			sarama.ErrNotController, sarama.ErrKafkaStorageError, sarama.ErrReassignmentInProgress,
			sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch, sarama.ErrThrottlingQuotaExceeded,
			sarama.ErrConcurrentTransactions, sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrNotCoordinatorForConsumer,
			sarama.ErrOffsetsLoadInProgress:
			return scopeInfra
		}
		return scopeSink
	}
	var cfgErr sarama.ConfigurationError
	if errors.As(err, &cfgErr) && strings.Contains(string(cfgErr), "MaxMessageBytes") {
		return scopeRecord // sarama's own size refusal, before sending
	}
	var netErr net.Error
	// breaker.ErrBreakerOpen: sarama stopped asking for a partition's
	// leader for a while after repeated failures.
	if errors.Is(err, sarama.ErrOutOfBrokers) || errors.Is(err, breaker.ErrBreakerOpen) || errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, sarama.ErrClosedClient) || errors.Is(err, sarama.ErrShuttingDown) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) {
		return scopeInfra
	}
	return scopeSink
}
