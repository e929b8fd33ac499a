package tablesink

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
)

// budget is a memory budget with slots file writer slots that records
// what is held by kind.
type budget struct {
	mu       sync.Mutex
	slots    int
	held     map[writers.MemoryKind]int64
	pressure bool
}

func newBudget(slots int) *budget {
	return &budget{slots: slots, held: map[writers.MemoryKind]int64{}}
}

func (b *budget) Hold(kind writers.MemoryKind, delta int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[kind] += delta
}

func (b *budget) Held(kind writers.MemoryKind) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[kind]
}

func (b *budget) Pressure() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pressure
}

func (b *budget) OpenFile(ctx context.Context) (func(), error) {
	if release, ok := b.TryOpenFile(); ok {
		return release, nil
	}
	return nil, writers.Errorf(writers.ErrExhausted, "no file slot")
}

func (b *budget) TryOpenFile() (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slots == 0 {
		return nil, false
	}
	b.slots--
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.slots++
		})
	}, true
}

// checkEmpty fails t unless all slots of b are free and nothing is held.
func (b *budget) checkEmpty(t *testing.T, slots int) {
	t.Helper()
	if b.Slots() != slots || b.Held(writers.MemoryQueued) != 0 || b.Held(writers.MemoryEncoder) != 0 {
		t.Errorf("%d slots free, %d+%d bytes held; want %d, nothing held", b.Slots(), b.Held(writers.MemoryQueued), b.Held(writers.MemoryEncoder), slots)
	}
}

func (b *budget) Slots() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.slots
}

// file is a File that buffers 8 bytes a row until flushed and is full at
// limit rows; it finishes as its directory and row count.
type file struct {
	dir       string
	values    map[string]*string
	schema    *arrow.Schema
	limit     int64
	rows      int64
	buffered  int64
	flushes   int
	fail      error // returned by Write
	slot      func()
	aborted   *atomic.Int32
	gate      chan struct{} // Finish waits for it to close, when not nil
	finErr    error         // returned by Finish
	finishing *atomic.Int32 // files in Finish at once
}

type done struct {
	dir  string
	rows int64
}

func (f *file) Name() string                    { return f.dir + "file" }
func (f *file) Fits(rec arrow.RecordBatch) bool { return f.schema.Equal(rec.Schema()) }
func (f *file) Buffered() int64                 { return f.buffered }
func (f *file) Full() bool                      { return f.rows >= f.limit }
func (f *file) Flush() error                    { f.flushes++; f.buffered = 0; return nil }
func (f *file) Write(rec arrow.RecordBatch) error {
	if f.fail != nil {
		return f.fail
	}
	f.rows += rec.NumRows()
	f.buffered += 8 * rec.NumRows()
	return nil
}
func (f *file) Finish() (done, error) {
	f.finishing.Add(1)
	defer f.finishing.Add(-1)
	if f.gate != nil {
		<-f.gate
	}
	f.slot()
	return done{f.dir, f.rows}, f.finErr
}
func (f *file) Abort() { f.slot(); f.aborted.Add(1) }

// starter starts files full at limit rows, failing their writes with
// fail; it counts aborted files in aborted and keeps the files started.
type starter struct {
	limit     int64
	fail      error
	gate      chan struct{} // files' Finish waits for it, when not nil
	finErr    error         // files' Finish returns it
	finishing atomic.Int32  // its files in Finish at once
	aborted   atomic.Int32
	mu        sync.Mutex
	started   []*file
}

func (s *starter) create(ctx context.Context, p Part, slot func()) (*file, error) {
	f := &file{dir: p.Dir, values: p.Values, schema: p.Rec.Schema(), limit: s.limit, fail: s.fail, slot: slot, aborted: &s.aborted, gate: s.gate, finErr: s.finErr, finishing: &s.finishing}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, f)
	return f, nil
}

var (
	ints = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	strs = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String}}, nil)
)

// rows returns a record of n rows of schema.
func rows(t *testing.T, mem memory.Allocator, schema *arrow.Schema, n int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for range n {
		switch schema {
		case ints:
			b.Field(0).(*array.Int64Builder).Append(1)
		default:
			b.Field(0).(*array.StringBuilder).Append("x")
		}
	}
	return b.NewRecordBatch()
}

// TestFiles: a file per partition, rolled when full or when the schema
// changes; past MaxOpenFiles every open file is finished; what files
// buffer is not charged; Abort gives back every slot.
func TestFiles(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(MaxOpenFiles + 8)
	st := &starter{limit: 10}
	fs := NewFiles[*file, done]("test", b, st.create)
	ctx := context.Background()
	write := func(dir string, schema *arrow.Schema, n int) {
		t.Helper()
		rec := rows(t, mem, schema, n)
		defer rec.Release()
		if err := fs.Write(ctx, Part{Dir: dir, Rec: rec}); err != nil {
			t.Fatal(err)
		}
	}
	write("a/", ints, 4)
	write("b/", ints, 4)
	write("a/", ints, 6) // a/ is full: it rolls, finishing in the background
	if _, ok := fs.Open(Part{Dir: "a/"}); ok || len(fs.Finished) != 0 {
		t.Fatalf("a/ open %v, finished %v; want a/ rolled, finished once waited for", ok, fs.Finished)
	}
	write("b/", strs, 1) // another schema: b/'s file rolls, after a/'s
	if len(fs.Finished) != 1 || fs.Finished[0] != (done{"a/", 10}) {
		t.Fatalf("finished %v, want a/ with 10 rows", fs.Finished)
	}
	if f, ok := fs.Open(Part{Dir: "b/"}); !ok || f.rows != 1 {
		t.Fatalf("open b/ = %v %v, want the new file with 1 row", f, ok)
	}
	fs.Finished = nil
	for i := range MaxOpenFiles {
		write(string(rune('c'+i))+"/", ints, 1)
	}
	// The rolled b/, then every open file.
	if len(fs.Finished) != MaxOpenFiles+1 || fs.Finished[0] != (done{"b/", 4}) {
		t.Fatalf("%d files finished past %d open ones (first %v), want the rolled b/ with 4 rows and all %d", len(fs.Finished), MaxOpenFiles, fs.Finished[0], MaxOpenFiles)
	}
	if got := b.Held(writers.MemoryEncoder); got != 0 {
		t.Errorf("uncharged files hold %d bytes on the budget", got)
	}
	fs.Abort()
	if got := st.aborted.Load(); got != 1 {
		t.Errorf("%d files aborted, want the 1 open", got)
	}
	if got := b.Slots(); got != MaxOpenFiles+8 {
		t.Errorf("%d slots free after Abort, want all %d", got, MaxOpenFiles+8)
	}
}

// TestFilesFirstWriteFails: a file whose first write fails stays open,
// finishes nothing and is abandoned by Abort, which gives its slot back;
// with no slot free a set holding none fails with the budget's error.
func TestFilesFirstWriteFails(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(1)
	boom := errors.New("boom")
	st := &starter{limit: 10, fail: boom}
	fs := NewFiles[*file, done]("test", b, st.create)
	rec := rows(t, mem, ints, 3)
	defer rec.Release()
	ctx := context.Background()
	if err := fs.Write(ctx, Part{Rec: rec}); !errors.Is(err, boom) {
		t.Fatalf("write: %v, want %v", err, boom)
	}
	if len(fs.Finished) != 0 {
		t.Errorf("finished %v after a failed write", fs.Finished)
	}
	fs.Abort()
	if st.aborted.Load() != 1 || b.Slots() != 1 {
		t.Errorf("after Abort: %d aborted, %d slots free; want 1 and 1", st.aborted.Load(), b.Slots())
	}
	b.slots = 0
	other := NewFiles[*file, done]("test", b, st.create)
	if err := other.Write(ctx, Part{Rec: rec}); !errors.Is(err, writers.ErrExhausted) {
		t.Errorf("write with no slot: %v, want ErrExhausted", err)
	}
}

// gate is an Encode that writes each part once let through: a test holds
// encoders busy with it.
type gate struct {
	entered chan struct{} // a part reached the encoder
	open    chan struct{} // closed: encode
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 64), open: make(chan struct{})} }

func (g *gate) encode(ctx context.Context, files *Files[*file, done], p Part) error {
	g.entered <- struct{}{}
	<-g.open
	return files.Write(ctx, p)
}

// TestStagedPool: a key takes an encoder per core (at most Pool.Max), one
// started while another has parts queued only what is left; a key counts
// busy only while it has parts queued; parts spread over the encoders;
// what is queued and what open files buffer is held on the budget and
// given back by Finish and Abort, with every slot; a failure is returned
// by a later Send and by Finish.
func TestStagedPool(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(8)
	var busy atomic.Int32
	ctx := context.Background()
	st := &starter{limit: 1 << 20}
	pool := Pool{Max: 4, Busy: &busy}
	g := newGate()
	a := NewPool[*file, done]("test", b, pool, st.create, g.encode)
	if busy.Load() != 0 {
		t.Fatalf("%d keys busy before any part", busy.Load())
	}
	rec := rows(t, mem, ints, 5)
	size := util.TotalRecordSize(rec)
	if err := a.Send(ctx, Part{Rec: rec}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if got := b.Held(writers.MemoryQueued); got != size {
		t.Errorf("%d bytes queued while the part waits for its encoder, want %d", got, size)
	}
	if busy.Load() != 1 {
		t.Errorf("%d keys busy with a part queued, want 1", busy.Load())
	}
	second := NewPool[*file, done]("test", b, pool, st.create, nil)
	if len(a.workers) != 2 || len(second.workers) != 1 {
		t.Fatalf("%d and %d encoders, want 2 (GOMAXPROCS) and 1 (what is left)", len(a.workers), len(second.workers))
	}
	close(g.open)
	for range 3 {
		if err := a.Send(ctx, Part{Rec: rows(t, mem, ints, 5)}); err != nil {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, "the parts encoded", func() bool { return busy.Load() == 0 })
	if got := b.Held(writers.MemoryEncoder); got != 8*20 {
		t.Errorf("%d bytes held for the open files, want what they buffer, %d", got, 8*20)
	}
	if got := b.Held(writers.MemoryQueued); got != 0 {
		t.Errorf("%d bytes queued after encoding", got)
	}
	got, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range got {
		n += d.rows
	}
	if len(got) != 2 || n != 20 {
		t.Errorf("finished %v, want 2 files (one an encoder) of 20 rows", got)
	}
	boom := errors.New("boom")
	failing := func(ctx context.Context, files *Files[*file, done], p Part) error { return boom }
	third := NewPool[*file, done]("test", b, pool, st.create, failing)
	for i := 0; ; i++ {
		err := third.Send(ctx, Part{Rec: rows(t, mem, ints, 1)})
		if errors.Is(err, boom) {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("send %d: %v, want the encoder's failure", i, err)
		}
	}
	if _, err := third.Finish(); !errors.Is(err, boom) {
		t.Errorf("finish: %v, want %v", err, boom)
	}
	if err := second.Send(ctx, Part{Rec: rows(t, mem, ints, 5)}); err != nil {
		t.Fatal(err)
	}
	if left := second.Abort(); len(left) != 0 {
		t.Errorf("abort returned %v, want no finished file", left)
	}
	second.Abort() // a second call does nothing
	for _, k := range []writers.MemoryKind{writers.MemoryQueued, writers.MemoryEncoder} {
		if h := b.Held(k); h != 0 {
			t.Errorf("%d bytes of kind %d still held", h, k)
		}
	}
	if b.Slots() != 8 || busy.Load() != 0 {
		t.Errorf("%d slots free, %d keys busy; want 8 and 0", b.Slots(), busy.Load())
	}
}

// TestStagedPoolSlots: a pooled key holds a file writer slot for each
// open file only once its encoders have nothing queued (a transaction
// between streams), an encoder that got no part none; with every slot
// taken and none held by the key, Send fails with the budget's error,
// holding nothing.
func TestStagedPoolSlots(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(4)
	ctx := context.Background()
	st := &starter{limit: 10}
	p := NewPool[*file, done]("test", b, Pool{Max: 4}, st.create, nil)
	if len(p.workers) != 2 || b.Slots() != 4 {
		t.Fatalf("%d encoders holding %d slots, want 2 holding none", len(p.workers), 4-b.Slots())
	}
	if err := p.Send(ctx, Part{Rec: rows(t, mem, ints, 4)}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, "one slot held, for the one open file", func() bool { return b.Slots() == 3 })
	if err := p.Send(ctx, Part{Rec: rows(t, mem, ints, 10)}); err != nil { // a full file
		t.Fatal(err)
	}
	testpoll.Until(t, "the full file's slot given back", func() bool { return b.Slots() == 3 && p.busy.Load() == 0 })
	taken := make([]func(), 0, 3)
	for range 3 {
		release, _ := b.TryOpenFile()
		taken = append(taken, release)
	}
	// The encoder with the open file still has its slot.
	if err := p.Send(ctx, Part{Rec: rows(t, mem, ints, 2)}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Finish(); err != nil || len(got) != 2 {
		t.Fatalf("finish: %v, %v; want 2 files", got, err)
	}
	if b.Slots() != 1 {
		t.Fatalf("%d slots free after Finish, want the key's 1", b.Slots())
	}
	release, _ := b.TryOpenFile()
	taken = append(taken, release)
	empty := NewPool[*file, done]("test", b, Pool{Max: 4}, st.create, nil)
	if err := empty.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); !errors.Is(err, writers.ErrExhausted) {
		t.Fatalf("send with no slot free: %v, want ErrExhausted", err)
	}
	if err := empty.Failed(); err != nil {
		t.Errorf("a key refused a slot failed: %v", err)
	}
	empty.Abort()
	for _, release := range taken {
		release()
	}
	b.checkEmpty(t, 4)
}

// TestStagedPoolSendCancelled: a Send waiting for a busy encoder returns
// when its context ends, releasing the part and what it held; a panic in
// the encoder fails the key, not the process.
func TestStagedPoolSendCancelled(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(2)
	st := &starter{limit: 1 << 20}
	g := newGate()
	p := NewPool[*file, done]("test", b, Pool{Max: 1}, st.create, g.encode)
	bg := context.Background()
	one := rows(t, mem, ints, 1)
	size := util.TotalRecordSize(one)
	if err := p.Send(bg, Part{Rec: one}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if err := p.Send(bg, Part{Rec: rows(t, mem, ints, 1)}); err != nil { // waits in the queue
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := p.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send to a busy encoder with an ended context: %v, want context.Canceled", err)
	}
	if got := b.Held(writers.MemoryQueued); got != 2*size {
		t.Errorf("%d bytes queued, want the 2 queued parts' %d", got, 2*size)
	}
	close(g.open)
	if got, err := p.Finish(); err != nil || len(got) != 1 || got[0].rows != 2 {
		t.Fatalf("finish: %v, %v; want one file of the 2 queued rows", got, err)
	}
	panicky := NewPool[*file, done]("test", b, Pool{Max: 1}, st.create, func(context.Context, *Files[*file, done], Part) error {
		panic("encoder bug")
	})
	if err := panicky.Send(bg, Part{Rec: rows(t, mem, ints, 1)}); err != nil {
		t.Fatal(err)
	}
	var pe *writers.PanicError
	if _, err := panicky.Finish(); !errors.As(err, &pe) {
		t.Fatalf("finish after an encoder panic: %v, want a PanicError", err)
	}
	b.checkEmpty(t, 2)
}

// TestStagedInline: an inline Staged encodes on the caller, returns a
// failure at once, charges what its open file buffers and flushes it
// under pressure.
func TestStagedInline(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(1)
	ctx := context.Background()
	st := &starter{limit: 10}
	s := NewInline[*file, done]("test", b, st.create, nil)
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 4)}); err != nil {
		t.Fatal(err)
	}
	f, ok := s.Open(Part{})
	if !ok || f.rows != 4 {
		t.Fatalf("open file %v %v, want 4 rows", f, ok)
	}
	if got := b.Held(writers.MemoryEncoder); got != 32 {
		t.Errorf("%d bytes held, want the open file's 32", got)
	}
	b.pressure = true
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); err != nil {
		t.Fatal(err)
	}
	if f.flushes != 1 || b.Held(writers.MemoryEncoder) != 0 {
		t.Errorf("under pressure: %d flushes, %d bytes held; want 1 and 0", f.flushes, b.Held(writers.MemoryEncoder))
	}
	b.pressure = false
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 5)}); err != nil { // full
		t.Fatal(err)
	}
	boom := errors.New("boom")
	st.fail = boom
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); !errors.Is(err, boom) {
		t.Fatalf("send: %v, want %v at once", err, boom)
	}
	if got := s.Abort(); len(got) != 1 || got[0].rows != 10 || st.aborted.Load() != 1 {
		t.Errorf("abort: returned %v, %d aborted; want the one full file of 10 rows, the failed one aborted", got, st.aborted.Load())
	}
	if b.Slots() != 1 || b.Held(writers.MemoryEncoder) != 0 {
		t.Errorf("%d slots free, %d bytes held; want 1 and 0", b.Slots(), b.Held(writers.MemoryEncoder))
	}
}

// waitBudget is a budget whose free slots go only to those who wait for
// them (OpenFile), as when other keys race for every slot that frees up.
type waitBudget struct{ *budget }

func (w waitBudget) TryOpenFile() (func(), bool) { return nil, false }
func (w waitBudget) OpenFile(ctx context.Context) (func(), error) {
	return w.budget.OpenFile(ctx)
}

// TestStagedInlineSlots: an inline key that waited for a file writer
// slot gives it back once its file has finished, so a transaction between
// streams holds no slot without an open (or finishing) file.
func TestStagedInlineSlots(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(1)
	st := &starter{limit: 10}
	s := NewInline[*file, done]("test", waitBudget{b}, st.create, nil)
	if err := s.Send(context.Background(), Part{Rec: rows(t, mem, ints, 10)}); err != nil { // a full file
		t.Fatal(err)
	}
	// The full file finishes in the background, then gives its slot back.
	testpoll.Until(t, "the rolled file's slot given back", func() bool { return b.Slots() == 1 })
	if got, err := s.Finish(); err != nil || len(got) != 1 {
		t.Fatalf("finish: %v, %v; want the one file", got, err)
	}
}

// TestStagedInlineFailureSticks: after an inline encoding failure the key
// has failed: a later Send encodes nothing and Finish publishes no file,
// the failed one abandoned.
func TestStagedInlineFailureSticks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(2)
	boom := errors.New("boom")
	st := &starter{limit: 10, fail: boom}
	s := NewInline[*file, done]("test", b, st.create, nil)
	ctx := context.Background()
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); !errors.Is(err, boom) {
		t.Fatalf("send: %v, want %v", err, boom)
	}
	f, _ := s.Open(Part{})
	f.fail = nil // the file would take rows now: the key must not
	if err := s.Send(ctx, Part{Rec: rows(t, mem, ints, 1)}); !errors.Is(err, boom) {
		t.Fatalf("send after the failure: %v, want %v again", err, boom)
	}
	if f.rows != 0 {
		t.Errorf("the failed key's file has %d rows, want none written after the failure", f.rows)
	}
	got, err := s.Finish()
	if !errors.Is(err, boom) || len(got) != 0 || st.aborted.Load() != 1 {
		t.Errorf("finish: %v, %v, %d aborted; want %v, no file, the failed one aborted", got, err, st.aborted.Load(), boom)
	}
	if b.Slots() != 2 || b.Held(writers.MemoryEncoder) != 0 {
		t.Errorf("%d slots free, %d bytes held; want 2 and 0", b.Slots(), b.Held(writers.MemoryEncoder))
	}
}
