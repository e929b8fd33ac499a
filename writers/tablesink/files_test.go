package tablesink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

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

// TestFilesRollInBackground: a full file finishes on a goroutine of its
// own: Write returns while its Finish is blocked, and the next file takes
// rows meanwhile, while the rolled file keeps its slot and what it
// buffered on the budget. The next roll, FinishAll and Abort wait for it;
// files are finished in the order they rolled; a failed finish is
// returned by the next wait.
func TestFilesRollInBackground(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	b := newBudget(4)
	st := &starter{limit: 10, gate: make(chan struct{})}
	fs := NewFiles[*file, done]("test", b, st.create)
	fs.charge = true
	write := func(n int) <-chan error {
		out := make(chan error, 1)
		go func() {
			rec := rows(t, mem, ints, n)
			defer rec.Release()
			err := fs.Write(ctx, Part{Rec: rec})
			fs.account()
			out <- err
		}()
		return out
	}
	returns := func(what string, c <-chan error) error {
		t.Helper()
		select {
		case err := <-c:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Write waited for the rolled file's Finish", what)
			return nil
		}
	}
	if err := returns("the roll", write(10)); err != nil {
		t.Fatal(err)
	}
	if !fs.Rolling() || b.Slots() != 3 || b.Held(writers.MemoryEncoder) != 80 {
		t.Fatalf("rolling %v, %d slots free, %d bytes held; want the rolled file holding 1 slot and its 80 bytes", fs.Rolling(), b.Slots(), b.Held(writers.MemoryEncoder))
	}
	if err := returns("rows for the next file", write(3)); err != nil {
		t.Fatal(err)
	}
	second := write(7) // fills the second file: its roll waits for the first
	select {
	case err := <-second:
		t.Fatalf("a second roll returned (%v) while the first file was finishing", err)
	default:
	}
	close(st.gate)
	if err := returns("the second roll", second); err != nil {
		t.Fatal(err)
	}
	if err := fs.FinishAll(); err != nil {
		t.Fatal(err)
	}
	if len(fs.Finished) != 2 || fs.Finished[0] != (done{"", 10}) || fs.Finished[1] != (done{"", 10}) {
		t.Fatalf("finished %v, want two files of 10 rows", fs.Finished)
	}
	fs.Abort()
	if b.Slots() != 4 || b.Held(writers.MemoryEncoder) != 0 {
		t.Fatalf("%d slots free, %d bytes held after Abort; want 4 and 0", b.Slots(), b.Held(writers.MemoryEncoder))
	}

	// A rolled file that fails to finish fails the next wait for it.
	boom := errors.New("boom")
	st = &starter{limit: 5, finErr: boom}
	fs = NewFiles[*file, done]("test", b, st.create)
	if err := returns("a failing roll", write(5)); err != nil {
		t.Fatal(err)
	}
	if err := fs.FinishAll(); !errors.Is(err, boom) {
		t.Fatalf("FinishAll: %v, want %v", err, boom)
	}
	fs.Abort()

	// Abort waits for the rolled file: finished, it is listed for the
	// caller to delete.
	st = &starter{limit: 5, gate: make(chan struct{})}
	fs = NewFiles[*file, done]("test", b, st.create)
	if err := returns("a roll before Abort", write(5)); err != nil {
		t.Fatal(err)
	}
	aborted := make(chan struct{})
	go func() { fs.Abort(); close(aborted) }()
	select {
	case <-aborted:
		t.Fatal("Abort returned while the rolled file was finishing")
	default:
	}
	close(st.gate)
	<-aborted
	if len(fs.Finished) != 1 || b.Slots() != 4 {
		t.Fatalf("finished %v, %d slots free after Abort; want the rolled file and 4", fs.Finished, b.Slots())
	}
}
