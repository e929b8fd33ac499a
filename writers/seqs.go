package writers

import "context"

// WriterSeq is one continuous-stream writer's share of a group commit:
// the seqs of the first and the last of its batches the commit publishes.
type WriterSeq struct {
	Writer      string
	First, Last int64
}

// SeqCommitter is implemented by sinks that take continuous streams: the
// rows of many writers staged under one auto-commit key (package
// flightsvc/groupcommit) and published by one sink commit that records
// each writer's last seq where the sink records committed epochs, so that
// CommittedEpoch answers a stream writer's durable seq.
//
// Write into such a key may be called by many streams in turn (never
// concurrently). A Write that fails with ErrInvalid must have staged
// nothing of its batch: one stream's bad rows then fail that stream only,
// and the group still commits.
type SeqCommitter interface {
	// CommitSeqs is Commit of key (an auto-commit key) that also records,
	// in the same sink commit, seq.Last as the committed epoch of each
	// seq.Writer. When the sink already records every writer at or above
	// its Last, nothing is published and Replayed is set (a retry after an
	// unknown outcome). When it records some writer at or above its First
	// otherwise, some of these rows were published by another commit (a
	// stream of the writer moved to another server): nothing is published
	// and the error is ErrConflict.
	CommitSeqs(ctx context.Context, key TxnKey, descs []Descriptor, seqs []WriterSeq) (CommitInfo, error)
}

// SeqsState is how a sink's recorded epochs stand against a group
// commit's seqs; recorded reads one writer's (ok false: never).
func SeqsState(seqs []WriterSeq, recorded func(writer string) (int64, bool)) (replayed bool, err error) {
	if len(seqs) == 0 {
		return false, nil
	}
	all := true
	var conflict *WriterSeq
	for i, s := range seqs {
		v, ok := recorded(s.Writer)
		if !ok || v < s.Last {
			all = false
		}
		if ok && v >= s.First && conflict == nil {
			conflict = &seqs[i]
		}
	}
	if all {
		return true, nil
	}
	if conflict != nil {
		v, _ := recorded(conflict.Writer)
		return false, Errorf(ErrConflict, "writer %q is already committed up to seq %d, and this group commit holds its seqs %d to %d: another stream of the writer (on another server?) committed them; the group is dropped and its streams resume from their durable seq", conflict.Writer, v, conflict.First, conflict.Last)
	}
	return false, nil
}
