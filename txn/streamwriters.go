package txn

import (
	"context"
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
)

// ClaimStreamWriter marks writer as a continuous-stream writer (package
// flightsvc/groupcommit) for good: the claim is journaled, so that after
// a restart too Begin, Adopt and Join refuse it. It is ErrWrongState when
// writer has epoch transactions the coordinator knows (open,
// precommitted, ended within the retention, or a committed epoch it
// remembers): a writer's name means
// one kind of delivery, so that its committed epoch and its durable seq
// are never the same number read two ways. A claim of writer being
// journaled is waited for: its outcome is the answer. The claim is this
// server's: servers do not share journals.
func (c *Coordinator) ClaimStreamWriter(ctx context.Context, writer string) error {
	if err := refuseWriter(ctx, "stream", writer); err != nil {
		return err
	}
	c.mu.Lock()
	if p := c.claims[writer]; p != nil {
		c.mu.Unlock()
		<-p.done
		return p.err
	}
	if c.streamWriters[writer] {
		c.mu.Unlock()
		return nil
	}
	_, committed := c.writerMax[writer] // kept across compactions
	known := committed || len(c.liveByWriter[writer]) > 0
	for id := range c.txns {
		if id.writer == writer {
			known = true
			break
		}
	}
	if known {
		c.mu.Unlock()
		return writers.Errorf(writers.ErrWrongState, "txn: writer %q has epoch transactions: a continuous stream needs a writer name of its own", writer)
	}
	// Refuse transactions of writer from now on; undone if the claim
	// cannot be journaled.
	p := &claim{done: make(chan struct{})}
	c.claims[writer] = p
	c.streamWriters[writer] = true
	c.mu.Unlock()
	// The claim stops being pending as its record is applied: the
	// compaction its own append may start must restate it (it leaves
	// pending claims out, and deletes the segment that holds this one).
	err := c.log(func() { delete(c.claims, writer) }, &record{typ: recStreamWriter, Writer: writer})
	if err != nil {
		c.mu.Lock()
		delete(c.streamWriters, writer)
		delete(c.claims, writer)
		p.err = fmt.Errorf("txn: claim writer %q for continuous streams: %w", writer, err)
		c.mu.Unlock()
	}
	close(p.done)
	return p.err
}

// claim is a ClaimStreamWriter being journaled; err is its outcome once
// done is closed.
type claim struct {
	done chan struct{}
	err  error
}

// refuseStreamWriter refuses op on a transaction of a continuous-stream
// writer.
func (c *Coordinator) refuseStreamWriter(op, writer string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streamWriterLocked(op, writer)
}

// streamWriterLocked refuses op on a transaction of a continuous-stream
// writer.
func (c *Coordinator) streamWriterLocked(op, writer string) error {
	if c.streamWriters[writer] {
		return writers.Errorf(writers.ErrWrongState, "txn: %s: writer %q writes continuous streams: an epoch transaction needs a writer name of its own", op, writer)
	}
	return nil
}
