package tablesink

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
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
