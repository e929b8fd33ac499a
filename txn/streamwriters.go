package txn

import "github.com/quiver-ingest/quiver/writers"

// ClaimStreamWriter marks writer as a continuous-stream writer (package
// flightsvc/groupcommit) for the life of the coordinator: from then on
// Begin, Adopt and Join refuse it. It is ErrWrongState when writer has
// epoch transactions the coordinator knows (open, precommitted, or ended
// within the retention): a writer's name means one kind of delivery, so
// that its committed epoch and its durable seq are never the same number
// read two ways.
func (c *Coordinator) ClaimStreamWriter(writer string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streamWriters[writer] {
		return nil
	}
	known := len(c.liveByWriter[writer]) > 0
	for id := range c.txns {
		if id.writer == writer {
			known = true
			break
		}
	}
	if known {
		return writers.Errorf(writers.ErrWrongState, "txn: writer %q has epoch transactions: a continuous stream needs a writer name of its own", writer)
	}
	c.streamWriters[writer] = true
	return nil
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
