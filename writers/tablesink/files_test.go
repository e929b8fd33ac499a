package tablesink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
)

// TestFilesKeyedByValues: Hive-style directory names spell null and the
// string "__HIVE_DEFAULT_PARTITION__" alike, so parts of distinct values
// share a directory. Each value gets a file of its own carrying its
// values, in whatever order the parts arrive; parts of equal values share
// a file. (Before files were keyed by values the three shared one file
// whose values were the first part's.)
func TestFilesKeyedByValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	str := func(s string) *string { return &s }
	const dir = "p=__HIVE_DEFAULT_PARTITION__/"
	values := []map[string]*string{
		{"p": str("__HIVE_DEFAULT_PARTITION__")},
		{"p": nil},
		{"p": str("")},
		{"p": nil},
		{"p": str("__HIVE_DEFAULT_PARTITION__")},
	}
	b := newBudget(8)
	st := &starter{limit: 100}
	fs := NewFiles[*file, done]("test", b, st.create)
	for _, v := range values {
		rec := rows(t, mem, ints, 1)
		err := fs.Write(context.Background(), Part{Dir: dir, Values: v, Rec: rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{"__HIVE_DEFAULT_PARTITION__": 2, "null": 2, `""`: 1}
	if len(st.started) != len(want) {
		t.Fatalf("%d files started for 3 distinct values in one directory, want 3", len(st.started))
	}
	for _, f := range st.started {
		name := "null"
		if v := f.values["p"]; v != nil {
			name = *v
			if name == "" {
				name = `""`
			}
		}
		if f.dir != dir || f.rows != want[name] {
			t.Errorf("file of p=%s in %q has %d rows, want %d in %q", name, f.dir, f.rows, want[name], dir)
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("no file for %v", want)
	}
	for _, v := range values[:3] {
		if f, ok := fs.Open(Part{Dir: dir, Values: v}); !ok || (f.values["p"] == nil) != (v["p"] == nil) {
			t.Errorf("Open(%v) = %v, %v", v, f, ok)
		}
	}
	fs.Abort()
}

// writeAsync writes n rows to dir of fs on another goroutine, and
// accounts for its files: a Write that waits for a Finish must not block
// the test.
func writeAsync(t *testing.T, fs *Files[*file, done], mem memory.Allocator, dir string, n int) <-chan error {
	rec := rows(t, mem, ints, n)
	out := make(chan error, 1)
	go func() {
		err := fs.Write(context.Background(), Part{Dir: dir, Rec: rec})
		fs.account()
		rec.Release()
		out <- err
	}()
	return out
}

// TestFilesRollInBackground: a full file finishes on a goroutine of its
// own: Write returns while its Finish is blocked, and the next file takes
// rows meanwhile, while the rolled file keeps its slot and what it
// buffered on the budget, which it gives back once done. The next roll
// waits for it; files are finished in the order they rolled.
func TestFilesRollInBackground(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(4)
	st := &starter{limit: 10, gate: make(chan struct{})}
	fs := NewFiles[*file, done]("test", b, st.create)
	fs.charge = true
	write := func(dir string, n int) <-chan error { return writeAsync(t, fs, mem, dir, n) }
	returned := func(what string, c <-chan error) {
		t.Helper()
		select {
		case err := <-c:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Write waited for the rolled file's Finish", what)
		}
	}
	returned("the roll of a/", write("a/", 10))
	if !fs.Rolling() || b.Slots() != 3 || b.Held(writers.MemoryEncoder) != 80 {
		t.Fatalf("rolling %v, %d slots free, %d bytes held; want the rolled file holding 1 slot and its 80 bytes", fs.Rolling(), b.Slots(), b.Held(writers.MemoryEncoder))
	}
	returned("rows for b/", write("b/", 3))
	second := write("b/", 7) // fills b/: its roll waits for a/'s
	// What follows cannot happen before the gate opens: a wrong Files
	// would show it within this wait.
	select {
	case err := <-second:
		t.Fatalf("b/'s roll returned (%v) while a/ was finishing", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := st.finishing.Load(); n != 1 {
		t.Fatalf("%d files finishing at once, want 1", n)
	}
	close(st.gate)
	returned("the roll of b/", second)
	testpoll.Until(t, "b/ finished and its bytes given back", func() bool { return !fs.Rolling() && b.Held(writers.MemoryEncoder) == 0 })
	if err := fs.FinishAll(); err != nil {
		t.Fatal(err)
	}
	if len(fs.Finished) != 2 || fs.Finished[0] != (done{"a/", 10}) || fs.Finished[1] != (done{"b/", 10}) {
		t.Fatalf("finished %v, want a/ then b/, 10 rows each", fs.Finished)
	}
	fs.Abort()
	if b.Slots() != 4 || b.Held(writers.MemoryEncoder) != 0 {
		t.Fatalf("%d slots free, %d bytes held after Abort; want 4 and 0", b.Slots(), b.Held(writers.MemoryEncoder))
	}
}

// TestFilesRollFailsLater: a rolled file that fails to finish fails the
// next roll, and FinishAll when it is the last.
func TestFilesRollFailsLater(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	boom := errors.New("boom")
	for _, next := range []string{"a roll", "FinishAll"} {
		b := newBudget(4)
		st := &starter{limit: 5, finErr: boom}
		fs := NewFiles[*file, done]("test", b, st.create)
		rec := rows(t, mem, ints, 5)
		if err := fs.Write(context.Background(), Part{Rec: rec}); err != nil {
			t.Fatalf("the failing file's roll: %v", err)
		}
		var err error
		if next == "a roll" {
			err = fs.Write(context.Background(), Part{Rec: rec})
		} else {
			err = fs.FinishAll()
		}
		rec.Release()
		if !errors.Is(err, boom) {
			t.Fatalf("%s after the failed file: %v, want %v", next, err, boom)
		}
		fs.Abort()
		if b.Slots() != 4 {
			t.Fatalf("%d slots free after Abort, want 4", b.Slots())
		}
	}
}

// TestFilesAbortWaitsForRoll: Abort waits for the rolled file: finished,
// it is listed for the caller to delete.
func TestFilesAbortWaitsForRoll(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := newBudget(4)
	st := &starter{limit: 5, gate: make(chan struct{})}
	fs := NewFiles[*file, done]("test", b, st.create)
	rec := rows(t, mem, ints, 5)
	defer rec.Release()
	if err := fs.Write(context.Background(), Part{Rec: rec}); err != nil {
		t.Fatal(err)
	}
	aborted := make(chan struct{})
	go func() { fs.Abort(); close(aborted) }()
	select {
	case <-aborted:
		t.Fatal("Abort returned while the rolled file was finishing")
	case <-time.After(100 * time.Millisecond):
	}
	close(st.gate)
	<-aborted
	if len(fs.Finished) != 1 || b.Slots() != 4 {
		t.Fatalf("finished %v, %d slots free after Abort; want the rolled file and 4", fs.Finished, b.Slots())
	}
}

// TestFilesRollSlots: a rolled file's slot is not a reason for a second
// one, nor for finishing the set's other files. The rolled files finish
// behind a gate, so each case is decided before they can be done:
//   - a pooled encoder whose base the rolled file holds waits for it
//     before its next file (one slot held, not two);
//   - with no slot free, a pooled encoder's roll leaves its other
//     partition's file open;
//   - so does a set without a base (a slot of its own per file).
func TestFilesRollSlots(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	b := newBudget(4)
	st := &starter{limit: 10, gate: make(chan struct{})}
	p := NewPool[*file, done]("test", b, Pool{Max: 1}, st.create, nil)
	send := func(dir string, n int) {
		t.Helper()
		if err := p.Send(ctx, Part{Dir: dir, Rec: rows(t, mem, ints, n)}); err != nil {
			t.Fatal(err)
		}
	}
	send("", 10) // a full file: it rolls, holding the base
	send("", 3)  // rows for the next file
	// A wrong encoder takes a second slot for them at once; give it time to.
	<-time.After(100 * time.Millisecond)
	if b.Slots() != 3 {
		t.Fatalf("%d slots held while the rolled file finishes, want its 1", 4-b.Slots())
	}
	close(st.gate)
	testpoll.Until(t, "the encoder idle, its rolled file done", func() bool { return p.busy.Load() == 0 && !p.workers[0].files.Rolling() })
	if b.Slots() != 3 {
		t.Fatalf("%d slots held for one open file, want 1", 4-b.Slots())
	}
	if got, err := p.Finish(); err != nil || len(got) != 2 {
		t.Fatalf("finish: %v, %v; want 2 files", got, err)
	}

	b = newBudget(3)
	st = &starter{limit: 10, gate: make(chan struct{})}
	p = NewPool[*file, done]("test", b, Pool{Max: 1}, st.create, nil)
	send("a/", 4)
	send("b/", 4)
	testpoll.Until(t, "a/ and b/ open", func() bool { return b.Slots() == 1 })
	release, _ := b.TryOpenFile() // another key takes the last slot
	defer release()
	send("a/", 6) // a/ is full: it rolls
	send("a/", 1) // a new a/ file, for want of a slot, after the rolled one
	close(st.gate)
	testpoll.Until(t, "the parts encoded", func() bool { return p.busy.Load() == 0 })
	if _, open := p.workers[0].files.Open(Part{Dir: "b/"}); !open {
		t.Fatal("b/'s file was finished by a/'s roll")
	}
	got, err := p.Finish()
	if err != nil || len(got) != 3 || got[0] != (done{"a/", 10}) {
		t.Fatalf("finished %v, %v; want a/ with 10 rows first, then a/ with 1 and b/ with 4", got, err)
	}

	b = newBudget(2)
	st = &starter{limit: 10, gate: make(chan struct{})}
	fs := NewFiles[*file, done]("test", b, st.create)
	write := func(dir string, n int) <-chan error { return writeAsync(t, fs, mem, dir, n) }
	for _, w := range []struct {
		dir string
		n   int
	}{{"a/", 4}, {"b/", 4}, {"a/", 6}} { // a/ and b/ take both slots; a/ rolls
		if err := <-write(w.dir, w.n); err != nil {
			t.Fatal(err)
		}
	}
	next := write("a/", 1) // no slot free until a/'s roll is done
	close(st.gate)
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	if _, open := fs.Open(Part{Dir: "b/"}); !open {
		t.Fatal("b/'s file was finished by a/'s roll (no base)")
	}
	fs.Abort()
	if len(fs.Finished) != 1 || b.Slots() != 2 {
		t.Fatalf("finished %v, %d slots free after Abort; want a/ and 2", fs.Finished, b.Slots())
	}
}
