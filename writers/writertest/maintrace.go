package writertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// RaceHarness connects [MaintenanceRace] to one sink.
type RaceHarness struct {
	// New returns an opened writer (a writers.Maintainer too) over fresh
	// sink storage, allocating from mem. The test closes it. Required.
	New func(t *testing.T, mem memory.Allocator) writers.Writer
	// Rows returns the records of one commit: new rows with ids [from,
	// to) and, for an upserting writer, new values for the existing ids
	// [updFrom, updTo). Required.
	Rows func(mem memory.Allocator, from, to, updFrom, updTo int) []arrow.RecordBatch
	// LiveIDs returns how often each id is live in w's latest version,
	// read the way the sink's readers read it. Required.
	LiveIDs func(t *testing.T, w writers.Writer) map[int64]int
	// SetDelay makes w's storage call delay before each read and each
	// conditional write (nil: none), to shake the interleaving. Required.
	SetDelay func(w writers.Writer, delay func())
	// Upserts: each commit also updates rows of its committer's previous
	// commit, and may lose to a concurrent one with ErrConflict.
	Upserts bool
}

// MaintenanceRace is a property test of random interleavings of commits,
// optimize and vacuum with no retention on one table: two committers
// commit small batches (auto-commit and epoch transactions) while a
// maintainer runs optimize and vacuum at random, and the storage delays
// its reads and conditional writes at random. However they interleave,
// every acknowledged commit's rows are live exactly once, no other row
// is, and no two acknowledgements name the same version. Files no
// version references are left to an hour, as the server leaves them to
// the longest transaction TTL.
func MaintenanceRace(t *testing.T, h RaceHarness) {
	seeds, commits := 6, 30
	if testing.Short() {
		seeds, commits = 2, 12
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { maintenanceRace(t, h, seed, commits) })
	}
}

// ack is one acknowledged commit: its new ids and version.
type ack struct {
	from, to int
	version  int64
}

// maintenanceRace runs one interleaving, drawn from seed, of two
// committers of n commits each against a maintainer.
func maintenanceRace(t *testing.T, h RaceHarness, seed uint64, n int) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w := h.New(t, mem)
	defer w.Close(ctx)
	maint, ok := w.(writers.Maintainer)
	if !ok {
		t.Fatalf("%T is not a writers.Maintainer", w)
	}
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	draw := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	h.SetDelay(w, func() { time.Sleep(time.Duration(draw(1500)) * time.Microsecond) })

	var (
		mu   sync.Mutex
		acks []ack
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var committers sync.WaitGroup
	for c := range 2 {
		committers.Go(func() {
			prevAcked := false
			for i := range n {
				from := (c*n + i) * 7
				key := writers.AutoKey(fmt.Sprintf("c%d-%d", c, i))
				if i%2 == 1 {
					key = writers.TxnKey{Writer: fmt.Sprintf("job%d", c), Epoch: int64(i)}
				}
				updates := 0
				if h.Upserts && prevAcked {
					updates = 3 // the first rows of the previous batch
				}
				info, err := commitRecords(ctx, w, key, h.Rows(mem, from, from+7, from-7, from-7+updates))
				if prevAcked = err == nil; h.Upserts && errors.Is(err, writers.ErrConflict) {
					continue // lost to a concurrent commit: not acknowledged
				}
				if err != nil {
					fail(fmt.Errorf("commit of rows %d..%d: %w", from, from+7, err))
					return
				}
				mu.Lock()
				acks = append(acks, ack{from, from + 7, info.Version})
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	var maintainer sync.WaitGroup
	maintainer.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			var err error
			if draw(3) == 0 {
				_, err = maint.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 64 << 20})
				if errors.Is(err, writers.ErrConflict) {
					err = nil // lost to the committers
				}
			} else {
				_, err = maint.Vacuum(ctx, writers.VacuumRequest{UntrackedMinAge: time.Hour})
			}
			if err != nil {
				fail(fmt.Errorf("maintenance: %w", err))
			}
		}
	})
	committers.Wait()
	close(done)
	maintainer.Wait()
	h.SetDelay(w, nil)
	if len(errs) > 0 {
		t.Fatalf("seed %d: %v", seed, errors.Join(errs...))
	}
	checkAcks(t, seed, acks, h.LiveIDs(t, w))
}

// checkAcks fails t unless live holds every acknowledged id exactly once
// and nothing else, and no version was acknowledged twice.
func checkAcks(t *testing.T, seed uint64, acks []ack, live map[int64]int) {
	t.Helper()
	versions := map[int64]int{}
	for _, a := range acks {
		if versions[a.version]++; versions[a.version] == 2 {
			t.Errorf("seed %d: version %d acknowledged for two different commits", seed, a.version)
		}
	}
	lost, total := 0, 0
	for _, a := range acks {
		for id := a.from; id < a.to; id++ {
			total++
			if live[int64(id)] != 1 {
				lost++
			}
			delete(live, int64(id))
		}
	}
	if lost > 0 || len(live) > 0 {
		t.Fatalf("seed %d: %d of %d acknowledged rows not live exactly once; %d rows live that nobody acknowledged", seed, lost, total, len(live))
	}
}

// commitRecords writes recs (releasing them) under key and commits them.
func commitRecords(ctx context.Context, w writers.Writer, key writers.TxnKey, recs []arrow.RecordBatch) (writers.CommitInfo, error) {
	var err error
	for _, rec := range recs {
		if err == nil {
			err = w.Write(ctx, key, rec)
		}
		rec.Release()
	}
	if err != nil {
		return writers.CommitInfo{}, err
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		return writers.CommitInfo{}, err
	}
	return w.Commit(ctx, key, []writers.Descriptor{d})
}
