package kafka

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/quiver-ingest/quiver/writers"
)

// CommitSeqs commits a group commit of continuous streams
// (writers.SeqCommitter): key is an auto-commit key whose records were sent
// inside one Kafka transaction as its streams wrote (autotxn.go); the
// markers {writer, epoch: last seq} of every advanced writer are sent in
// the same transaction before it commits, so that a read_committed
// consumer sees the records and the seqs together or neither, and
// CommittedEpoch answers a stream writer's durable seq.
//
// The writers' markers are read first (one scan of the marker topic per
// group commit): when every writer is recorded at its last seq or later,
// the transaction is aborted and the commit answers Replayed; when some
// are recorded at or above their first seq, it is aborted with
// ErrConflict.
func (w *Writer) CommitSeqs(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	if len(seqs) == 0 {
		return w.Commit(ctx, key, descs)
	}
	names := make(map[string]bool, len(seqs))
	for _, s := range seqs {
		names[s.Writer] = true
	}
	recorded, err := w.readMarkersOf(ctx, names)
	if err != nil {
		return writers.CommitInfo{}, err
	}
	replayed, err := writers.SeqsState(seqs, func(writer string) (int64, bool) {
		e, ok := recorded[writer]
		return e, ok
	})
	if err != nil || replayed {
		if rerr := w.Rollback(ctx, key); rerr != nil {
			w.log.Warn("kafka sink could not abort a replayed or conflicting group commit's transaction", "err", rerr)
		}
		return writers.CommitInfo{Version: writers.NoVersion, Replayed: replayed}, err
	}
	if err := w.sendSeqMarkers(ctx, key, seqs); err != nil {
		if rerr := w.Rollback(ctx, key); rerr != nil {
			w.log.Warn("kafka sink could not abort a group commit's transaction", "err", rerr)
		}
		return writers.CommitInfo{}, err
	}
	return w.Commit(ctx, key, descs)
}

// sendSeqMarkers sends the markers of seqs inside key's transaction,
// beginning one when the group sent no record, and waits for their
// delivery reports.
func (w *Writer) sendSeqMarkers(ctx context.Context, key writers.TxnKey, seqs []writers.WriterSeq) error {
	st, err := w.stageOf(key, false)
	if err != nil {
		return err
	}
	if st == nil || st.desc == nil {
		return writers.Errorf(writers.ErrWrongState, "kafka: commit of group %s before its precommit", key)
	}
	if st.failed != nil {
		return st.failed
	}
	if st.auto == nil {
		if st.auto, err = w.beginAuto(ctx); err != nil {
			return err
		}
	}
	d := newDelivery()
	for _, s := range seqs {
		mk, mv := w.markerRecord(writers.TxnKey{Writer: s.Writer, Epoch: s.Last})
		if n := len(mk) + len(mv) + recordOverhead; n > w.markerBytes {
			return writers.Errorf(writers.ErrInvalid, "kafka: the marker of stream writer %q is %d bytes, more than marker topic %q takes: use a shorter writer name", s.Writer, n, w.cfg.MarkerTopic)
		}
		if err := st.auto.prod.p.send(ctx, d, &sarama.ProducerMessage{Topic: w.cfg.MarkerTopic, Key: sarama.ByteEncoder(mk), Value: sarama.ByteEncoder(mv)}); err != nil {
			return writers.Errorf(writers.ErrUnavailable, "kafka: send the markers of a group commit: %w", err)
		}
	}
	d.seal()
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
	defer cancel()
	if err := d.wait(wctx); err != nil {
		return writers.Errorf(writers.ErrUnavailable, "kafka: waiting for the markers of a group commit: %w", err)
	}
	if _, failed := d.result(); len(failed) > 0 {
		return writers.Errorf(writers.ErrUnavailable, "kafka: marker topic %q refused %d markers of a group commit: %w", w.cfg.MarkerTopic, len(failed), failed[0].err)
	}
	return nil
}

// readMarkersOf reads the highest epoch each of names committed on this
// endpoint (see readMarkers).
func (w *Writer) readMarkersOf(ctx context.Context, names map[string]bool) (map[string]int64, error) {
	out, err := w.scanMarkers(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return out, nil
}
