package kafka

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// maxIdleAutoProducers bounds the idle transactional producers an endpoint
// keeps for auto-commit streams. A stream leases one for its whole life,
// so as many run as there are concurrent streams; beyond this bound the
// surplus is closed when its stream ends.
const maxIdleAutoProducers = 8

// maxAutoTxnTimeout caps the transaction timeout of auto-commit streams
// (Kafka's default transaction.max.timeout.ms). A stream must commit
// within it of its first record, and a crashed server's open stream
// holds back read_committed consumers of its partitions at most that long.
const maxAutoTxnTimeout = 15 * time.Minute

// instanceFile holds this data_dir's random instance id, part of the
// auto-commit transactional ids (autoTxnID).
const instanceFile = "auto-instance"

// autoProducer is a pooled transactional producer; idx numbers its
// transactional id.
type autoProducer struct {
	idx int
	p   *pipe
}

// autoPool holds the idle auto-commit producers of an endpoint and the
// indexes in use (idle or leased). A new producer takes the lowest free
// index, so the ids stay few and a restarted server reuses them, and its
// InitProducerId aborts what a crash left open under them.
type autoPool struct {
	mu     sync.Mutex // guards the following fields
	idle   []*autoProducer
	inUse  map[int]bool
	closed bool
}

// autoTxnID is the transactional id of auto-commit producer idx:
// quiver/<endpoint>/auto/<instance>/<idx>. The instance id of the data_dir
// keeps two servers serving one endpoint from fencing each other's
// streams, and stays the same across a restart.
func (w *Writer) autoTxnID(idx int) string {
	return "quiver/" + w.env.Endpoint + "/auto/" + w.instance + "/" + strconv.Itoa(idx)
}

// leaseAuto returns an idle producer, or starts one (whose InitProducerId
// is the one broker round trip a pooled producer pays, once).
func (w *Writer) leaseAuto() (*autoProducer, error) {
	ap := &w.autoPool
	ap.mu.Lock()
	if ap.closed {
		ap.mu.Unlock()
		return nil, w.notOpen()
	}
	if n := len(ap.idle); n > 0 {
		a := ap.idle[n-1]
		ap.idle = ap.idle[:n-1]
		ap.mu.Unlock()
		return a, nil
	}
	if ap.inUse == nil {
		ap.inUse = map[int]bool{}
	}
	idx := 0
	for ap.inUse[idx] {
		idx++
	}
	ap.inUse[idx] = true
	ap.mu.Unlock()
	p, err := w.newPipe(w.producerBytes, w.autoTxnID(idx), w.autoTimeout)
	if err != nil {
		ap.mu.Lock()
		delete(ap.inUse, idx)
		ap.mu.Unlock()
		return nil, err
	}
	w.m.autoProducers.Inc()
	return &autoProducer{idx: idx, p: p}, nil
}

// returnAuto gives a back after its transaction ended: kept when keep is
// set (committed or aborted cleanly) and the pool has room, closed
// otherwise.
func (w *Writer) returnAuto(ctx context.Context, a *autoProducer, keep bool) {
	ap := &w.autoPool
	ap.mu.Lock()
	if keep && !ap.closed && len(ap.idle) < maxIdleAutoProducers {
		ap.idle = append(ap.idle, a)
		ap.mu.Unlock()
		return
	}
	ap.mu.Unlock()
	w.closeAuto(ctx, a)
}

func (w *Writer) closeAuto(ctx context.Context, a *autoProducer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWait)
	defer cancel()
	if err := a.p.close(ctx); err != nil {
		w.log.Warn("kafka sink: auto-commit producer did not close cleanly", "err", err)
	}
	ap := &w.autoPool
	ap.mu.Lock()
	delete(ap.inUse, a.idx)
	ap.mu.Unlock()
}

// closeAutoPool closes the idle producers; leased ones close when their
// stream returns them. Called by Close.
func (w *Writer) closeAutoPool(ctx context.Context) {
	ap := &w.autoPool
	ap.mu.Lock()
	ap.closed = true
	idle := ap.idle
	ap.idle = nil
	ap.mu.Unlock()
	for _, a := range idle {
		w.closeAuto(ctx, a)
	}
}

// loadInstance reads the data_dir's instance id, creating it at first
// (written to a temporary file and renamed, so it is whole or absent).
func (w *Writer) loadInstance() (string, error) {
	path := filepath.Join(w.dir, instanceFile)
	b, err := os.ReadFile(path)
	if id := strings.TrimSpace(string(b)); err == nil && id != "" {
		return id, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", writers.Errorf(writers.ErrUnavailable, "kafka: read %s: %w (check data_dir)", path, err)
	}
	id := strings.ToLower(rand.Text()[:12]) // 60 random bits
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", writers.Errorf(writers.ErrUnavailable, "kafka: write %s: %w (check data_dir)", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", writers.Errorf(writers.ErrUnavailable, "kafka: create %s: %w (check data_dir)", path, err)
	}
	return id, nil
}

// autoTimeout returns the transaction timeout of auto-commit streams:
// the broker's transaction.max.timeout.ms capped at maxAutoTxnTimeout, or
// sarama's default of one minute when the broker does not say (a longer
// timeout than the broker allows would fail every producer start).
func (a *admin) autoTimeout() time.Duration {
	bs := a.cl.Brokers()
	if len(bs) == 0 {
		return time.Minute
	}
	entries, err := a.describe(sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(bs[0].ID()))})
	if err != nil {
		return time.Minute
	}
	for _, c := range entries {
		if c.Name == "transaction.max.timeout.ms" {
			if ms, err := strconv.ParseInt(c.Value, 10, 64); err == nil && ms > 0 {
				return min(time.Duration(ms)*time.Millisecond, maxAutoTxnTimeout)
			}
		}
	}
	return time.Minute
}
