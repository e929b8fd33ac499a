package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
)

// Fetch sizes of readCommitted. The broker returns a first record batch
// larger than fetchPartitionBytes whole (KIP-74), so they bound memory per
// request, not the largest marker.
const (
	fetchPartitionBytes = 1 << 20
	fetchMaxWaitMs      = 100
)

// maxDecompressedBatch bounds what one compressed record batch a read
// fetches may inflate to (sarama leaves it unbounded): a few hundred bytes
// of zstd may claim gigabytes. The sink's only fetches are its marker
// reads, whose batches hold markers of about a hundred bytes each.
const maxDecompressedBatch = 64 << 20

func init() {
	if sarama.MaxDecompressedBatchSize == 0 {
		sarama.MaxDecompressedBatchSize = maxDecompressedBatch
	}
}

// settleWait bounds how long a read waits for the transactions open on a
// partition when it begins to end. A broker writes the markers of a
// transaction after EndTxn has answered, so a commit that has just
// answered may not be readable yet; its markers follow within
// milliseconds. A transaction left open by a crash holds the last stable
// offset until the broker aborts it (its transaction timeout), and a large
// commit holds it while its data is delivered: the read then answers from
// the records before it, unless a record it is asked about lies past it
// (committed or not, no reader can tell yet): errUnsettled. Answering
// without such a marker would take a commit whose answer was lost for
// undone, and publish it again.
const settleWait = 5 * time.Second

// errUnsettled is a record asked about past the last stable offset.
var errUnsettled = errors.New("a transaction still open on the partition holds a marker asked about")

// errRewound is a read from an offset past the partition's end: its
// offsets went back (an unclean leader election truncated it).
var errRewound = errors.New("the partition ends before the offset the read goes on from")

// readCommitted calls each with the key and value of every record of
// partition p of topic that a read_committed consumer sees, from offset
// from (or the log start, when later) to the last stable offset once the
// transactions open when the read begins have ended (or after settleWait:
// then errUnsettled when a record past it has a key wanted reports):
// records of aborted transactions and control records are skipped, and the
// read knows it is done even when the log ends with a transaction marker.
// It returns the
// offset the next read goes on from; errRewound when the partition ends
// before from. sarama's consumer hides control records and its position,
// so the sink fetches itself, with sarama's protocol types.
func (a *admin) readCommitted(ctx context.Context, topic string, p int32, from int64, wanted func(key []byte) bool, each func(key, value []byte)) (int64, error) {
	leader, err := a.cl.Leader(topic, p)
	if err != nil {
		return 0, err
	}
	fail := func(err error) (int64, error) {
		// A failed connection is reopened by the next Leader call; stale
		// metadata is refreshed.
		_ = leader.Close()
		_ = a.cl.RefreshMetadata(topic)
		return 0, err
	}
	start, err := listOffset(leader, topic, p, sarama.OffsetOldest, sarama.ReadCommitted)
	if err != nil {
		return fail(err)
	}
	end, hwm, err := settledEnd(ctx, leader, topic, p)
	if err != nil {
		return fail(err)
	}
	if hwm < from {
		return 0, errRewound
	}
	if end < hwm {
		hidden, err := uncommittedKey(ctx, leader, topic, p, end, hwm, wanted)
		if err != nil {
			return fail(err)
		}
		if hidden {
			return 0, fmt.Errorf("%w: past its last stable offset %d (its end %d, %s later)", errUnsettled, end, hwm, settleWait)
		}
	}
	pos := max(start, from)
	for pos < end {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		block, err := fetch(leader, topic, p, pos, sarama.ReadCommitted)
		if err != nil {
			return fail(err)
		}
		next, err := committedRecords(block, pos, each)
		if err != nil {
			return 0, err
		}
		if next == pos {
			return 0, fmt.Errorf("offset %d: the fetch up to %d returned no record batch", pos, end)
		}
		pos = next
	}
	return pos, nil
}

// fetch reads partition p of topic from offset pos under isolation.
func fetch(leader *sarama.Broker, topic string, p int32, pos int64, isolation sarama.IsolationLevel) (*sarama.FetchResponseBlock, error) {
	req := &sarama.FetchRequest{Version: 12, MinBytes: 1, MaxWaitTime: fetchMaxWaitMs, MaxBytes: 4 * fetchPartitionBytes,
		Isolation: isolation, SessionEpoch: -1}
	req.AddBlock(topic, p, pos, fetchPartitionBytes, -1)
	resp, err := leader.Fetch(req)
	if err != nil {
		return nil, err
	}
	block := resp.GetBlock(topic, p)
	switch {
	case block == nil:
		return nil, sarama.ErrIncompleteResponse
	case !errors.Is(block.Err, sarama.ErrNoError):
		return nil, block.Err
	}
	return block, nil
}

// committedRecords walks the record batches of one fetch from pos, as
// Kafka's consumer does under read_committed: a transactional batch of a
// producer with an aborted transaction starting at or before it is
// skipped, until that producer's abort marker. A batch ending before pos
// answers another fetch. It returns the offset to fetch next.
func committedRecords(block *sarama.FetchResponseBlock, pos int64, each func(key, value []byte)) (int64, error) {
	aborted := slices.Clone(block.AbortedTransactions)
	slices.SortFunc(aborted, func(x, y *sarama.AbortedTransaction) int { return cmp.Compare(x.FirstOffset, y.FirstOffset) })
	abortedBy := map[int64]bool{} // producer ids inside an aborted transaction
	for _, rs := range block.RecordsSet {
		b := rs.RecordBatch
		if b == nil {
			return pos, fmt.Errorf("offset %d: a pre-0.11 message set, which the marker topic never holds", pos)
		}
		if b.PartialTrailingRecord {
			break // fetched whole by the next request
		}
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		if last < pos || b.LastOffsetDelta < 0 {
			return pos, fmt.Errorf("offset %d: the fetch answered a batch of offsets %d to %d, before it", pos, b.FirstOffset, last)
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= last {
			abortedBy[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case b.Control:
			if len(b.Records) > 0 && isAbortMarker(b.Records[0].Key) {
				delete(abortedBy, b.ProducerID)
			}
		case b.IsTransactional && abortedBy[b.ProducerID]:
		default:
			for _, r := range b.Records {
				if b.FirstOffset+r.OffsetDelta >= pos {
					each(r.Key, r.Value)
				}
			}
		}
		pos = max(pos, last+1)
	}
	return pos, nil
}

// isAbortMarker tells an abort from a commit marker: a control record's
// key is version int16, type int16 (0 abort, 1 commit).
func isAbortMarker(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == 0
}

// settledEnd returns the partition's last stable offset once it has
// reached the high watermark of the moment settledEnd was called, or as it
// is after settleWait, with that high watermark.
func settledEnd(ctx context.Context, leader *sarama.Broker, topic string, p int32) (lso, hwm int64, err error) {
	hwm, err = listOffset(leader, topic, p, sarama.OffsetNewest, sarama.ReadUncommitted)
	if err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(settleWait)
	for {
		lso, err = listOffset(leader, topic, p, sarama.OffsetNewest, sarama.ReadCommitted)
		if err != nil || lso >= hwm || time.Now().After(deadline) {
			return lso, hwm, err
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// uncommittedKey reports whether a data record of partition p in offsets
// [from, to) has a key wanted reports, reading uncommitted: records of
// transactions still open, and those committed or aborted after them.
func uncommittedKey(ctx context.Context, leader *sarama.Broker, topic string, p int32, from, to int64, wanted func([]byte) bool) (bool, error) {
	for pos := from; pos < to; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		block, err := fetch(leader, topic, p, pos, sarama.ReadUncommitted)
		if err != nil {
			return false, err
		}
		next := pos
		for _, rs := range block.RecordsSet {
			b := rs.RecordBatch
			if b == nil || b.PartialTrailingRecord {
				break
			}
			for _, r := range b.Records {
				if o := b.FirstOffset + r.OffsetDelta; !b.Control && o >= pos && o < to && wanted(r.Key) {
					return true, nil
				}
			}
			next = max(next, b.FirstOffset+int64(b.LastOffsetDelta)+1)
		}
		if next == pos {
			return false, fmt.Errorf("offset %d: the fetch up to %d returned no record batch", pos, to)
		}
		pos = next
	}
	return false, nil
}

// listOffset asks leader for the earliest (sarama.OffsetOldest) or latest
// offset of a partition: its last stable offset under read_committed, its
// high watermark under read_uncommitted.
func listOffset(leader *sarama.Broker, topic string, p int32, at int64, isolation sarama.IsolationLevel) (int64, error) {
	req := sarama.NewOffsetRequest(sarama.V3_6_0_0)
	req.IsolationLevel = isolation
	req.AddBlock(topic, p, at, 1)
	resp, err := leader.GetAvailableOffsets(req)
	if err != nil {
		return 0, err
	}
	b := resp.GetBlock(topic, p)
	switch {
	case b == nil:
		return 0, sarama.ErrIncompleteResponse
	case !errors.Is(b.Err, sarama.ErrNoError):
		return 0, b.Err
	case len(b.Offsets) > 0: // version 0
		return b.Offsets[0], nil
	}
	return b.Offset, nil
}
