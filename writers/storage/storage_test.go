package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/internal/fsync"
	"github.com/quiver-ingest/quiver/writers"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperProcess())
	}
	if os.Getenv(wrongCredsEnv) != "" {
		os.Exit(wrongCredsProcess())
	}
	emulator.RunTests(m)
}

// opener opens a fresh empty root of one scheme.
type opener struct {
	name string
	open func(t *testing.T) *Bucket
}

// openers are the schemes tested for real: file:// and mem://, then S3,
// GCS and Azure Blob on their emulators (internal/emulator).
var openers = append([]opener{
	{"file", func(t *testing.T) *Bucket { return mustOpen(t, "file://"+t.TempDir()+"/root", Options{}) }},
	{"mem", func(t *testing.T) *Bucket { return mustOpen(t, "mem://"+memName(t)+"/root", Options{}) }},
}, cloudOpeners()...)

// cloudOpeners returns an opener per emulated cloud store.
func cloudOpeners() []opener {
	var out []opener
	for _, e := range emulator.All() {
		out = append(out, opener{e.Name, func(t *testing.T) *Bucket { return mustOpen(t, e.Start(t).Table(t), Options{}) }})
	}
	return out
}

// memRuns numbers memName's names: mem:// data outlives a test, and -count
// runs a test again in the same process.
var memRuns atomic.Int64

// memName returns a mem:// bucket name no other test run uses.
func memName(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("%s-%d", name, memRuns.Add(1))
}

func mustOpen(t *testing.T, uri string, opts Options) *Bucket {
	t.Helper()
	b, err := Open(t.Context(), uri, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", uri, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func mustPut(t *testing.T, b *Bucket, key, data string) {
	t.Helper()
	if err := b.Put(t.Context(), key, []byte(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func wantContent(t *testing.T, b *Bucket, key, want string) {
	t.Helper()
	got, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func listKeys(t *testing.T, b *Bucket, prefix, startAfter string) []string {
	t.Helper()
	var keys []string
	for o, err := range b.List(t.Context(), prefix, startAfter) {
		if err != nil {
			t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func TestGetPut(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			if _, err := b.Get(ctx, "a/b.json"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Get missing: err = %v, want ErrNotExist", err)
			}
			mustPut(t, b, "a/b.json", "one")
			wantContent(t, b, "a/b.json", "one")
			mustPut(t, b, "a/b.json", "two!")
			wantContent(t, b, "a/b.json", "two!")
			mustPut(t, b, "empty", "")
			wantContent(t, b, "empty", "")
		})
	}
}

// TestGetMax: an object over the read's limit is ErrInvalid, on every
// store; on file:// a key that is no regular file (a symlink to
// /dev/zero would be read forever) is refused too.
func TestGetMax(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			mustPut(t, b, "k", "0123456789")
			if got, err := b.GetMax(t.Context(), "k", 10); err != nil || string(got) != "0123456789" {
				t.Fatalf("GetMax at the limit = %q, %v", got, err)
			}
			if got, err := b.GetMax(t.Context(), "k", 9); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("GetMax over the limit = %q, %v, want ErrInvalid", got, err)
			}
		})
	}
	dir := t.TempDir()
	b := mustOpen(t, "file://"+dir, Options{})
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(t.Context(), "zero"); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Get of a symlink to /dev/zero = %d bytes, %v, want ErrInvalid", len(got), err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(t.Context(), "fifo"); !errors.Is(err, writers.ErrInvalid) { // opening it would block
		t.Fatalf("Get of a FIFO = %d bytes, %v, want ErrInvalid", len(got), err)
	}
}

func TestPutIfAbsent(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			if err := b.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("first")); err != nil {
				t.Fatalf("first PutIfAbsent: %v", err)
			}
			err := b.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("second"))
			if !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("second PutIfAbsent: err = %v, want ErrAlreadyExists", err)
			}
			if !strings.Contains(err.Error(), "00000000000000000000.json") || !strings.Contains(err.Error(), b.URI()) {
				t.Errorf("error %q does not name the key and the root", err)
			}
			wantContent(t, b, "_delta_log/00000000000000000000.json", "first")
		})
	}
}

// TestPrepared: a prepared object is invisible until published; Put
// replaces, PutIfAbsent refuses a taken key, Discard drops it, and on
// file:// nothing temporary is left after any of them (a publication
// whose context is done included).
func TestPrepared(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			prepare := func(key, data string) *Prepared {
				t.Helper()
				p, err := b.Prepare(ctx, key, []byte(data))
				if err != nil {
					t.Fatalf("Prepare(%q): %v", key, err)
				}
				return p
			}
			first := prepare("v/1", "one")
			if keys := listKeys(t, b, "", ""); len(keys) != 0 {
				t.Fatalf("prepared, unpublished objects listed: %v", keys)
			}
			if err := first.PutIfAbsent(ctx); err != nil {
				t.Fatal(err)
			}
			wantContent(t, b, "v/1", "one")
			if err := prepare("v/1", "two").PutIfAbsent(ctx); !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("PutIfAbsent of a taken key: %v, want ErrAlreadyExists", err)
			}
			wantContent(t, b, "v/1", "one")
			if err := prepare("hint", "x").Put(ctx); err != nil {
				t.Fatal(err)
			}
			prepare("hint", "y").Discard()
			wantContent(t, b, "hint", "x")
			if err := prepare("hint", "z").Put(ctx); err != nil {
				t.Fatal(err)
			}
			wantContent(t, b, "hint", "z")
			if !b.Local() {
				return
			}
			late := prepare("v/2", "late")
			done, cancel := context.WithCancel(ctx)
			cancel()
			if err := late.PutIfAbsent(done); !errors.Is(err, context.Canceled) {
				t.Fatalf("PutIfAbsent with a done context: %v, want context.Canceled", err)
			}
			if _, err := b.Stat(ctx, "v/2"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Stat of a publication whose context was done: %v, want ErrNotExist", err)
			}
			wantNoSideFiles(t, b.dir)
		})
	}
}

// TestMkdirWaitsForItsSync: a file published in a folder another
// goroutine is creating waits until that folder's parent is synced: a
// crash before then could lose the folder and the file with it.
func TestMkdirWaitsForItsSync(t *testing.T) {
	b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
	defer func(f func(string) error) { syncParent = f }(syncParent)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	syncParent = func(dir string) error {
		if filepath.Base(dir) == "root" { // the sync of root/new's creation
			close(held)
			<-release
		}
		return fsync.Dir(dir)
	}
	first := make(chan error, 1)
	go func() { first <- b.Put(t.Context(), "new/a", []byte("a")) }()
	<-held
	second := make(chan error, 1)
	go func() { second <- b.Put(t.Context(), "new/b", []byte("b")) }()
	select {
	case err := <-second:
		t.Fatalf("a put in a folder whose creation is not synced returned %v before the sync", err)
	case <-time.After(100 * time.Millisecond):
	}
	once.Do(func() { close(release) })
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	wantContent(t, b, "new/a", "a")
	wantContent(t, b, "new/b", "b")
}

// TestMkdirSyncsWhatItHasNotSeen: a folder under the root whose sync
// failed, or that another process created, is synced into its parent by
// the next put in it, once.
func TestMkdirSyncsWhatItHasNotSeen(t *testing.T) {
	dir := t.TempDir() + "/root"
	b := mustOpen(t, "file://"+dir, Options{})
	defer func(f func(string) error) { syncParent = f }(syncParent)
	synced := map[string]int{} // folder synced into its parent, by name
	fail := true
	syncParent = func(parent string) error {
		if filepath.Base(parent) == "root" && fail {
			fail = false
			return syscall.EIO
		}
		synced[filepath.Base(parent)]++
		return fsync.Dir(parent)
	}
	if err := b.Put(t.Context(), "new/a", []byte("a")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("put in a folder whose sync failed: %v, want EIO", err)
	}
	mustPut(t, b, "new/b", "b")
	if synced["root"] != 1 {
		t.Fatalf("root synced %d times after its new folder's sync failed, want 1", synced["root"])
	}
	if err := os.MkdirAll(filepath.Join(dir, "other", "deep"), 0o777); err != nil { // another process
		t.Fatal(err)
	}
	mustPut(t, b, "other/deep/c", "c")
	mustPut(t, b, "other/deep/d", "d")
	if synced["root"] != 2 || synced["other"] != 1 {
		t.Fatalf("folders another process made synced %v, want root twice (new, other) and other once", synced)
	}
	wantNoSideFiles(t, dir)
}

// TestMkdirRoot: a bucket root this process created but could not sync
// into its parent is synced by the next put, not taken as it is; a folder
// removed after it was made durable is made again.
func TestMkdirRoot(t *testing.T) {
	dir := t.TempDir() + "/root"
	b := mustOpen(t, "file://"+dir, Options{})
	defer func(f func(string) error) { syncParent = f }(syncParent)
	parentSyncs, fail := 0, true
	syncParent = func(parent string) error {
		if parent == filepath.Dir(dir) {
			if fail {
				fail = false
				return syscall.EIO
			}
			parentSyncs++
		}
		return fsync.Dir(parent)
	}
	if err := b.Put(t.Context(), "k", []byte("a")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("put in a root whose sync failed: %v, want EIO", err)
	}
	mustPut(t, b, "k", "b")
	if parentSyncs != 1 {
		t.Fatalf("the root synced into its parent %d times after its sync failed, want 1", parentSyncs)
	}
	mustPut(t, b, "sub/k", "c")
	if err := os.RemoveAll(filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, b, "sub/k", "d")
	wantContent(t, b, "sub/k", "d")
}

// TestPutIfAbsentRace: of N goroutines racing for one key exactly one wins
// and the stored content is the winner's.
func TestPutIfAbsentRace(t *testing.T) {
	const n = 16
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					errs[i] = b.PutIfAbsent(t.Context(), "k", fmt.Appendf(nil, "writer-%d", i))
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("writers %d and %d both won", winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, ErrAlreadyExists):
					t.Fatalf("writer %d: err = %v, want ErrAlreadyExists", i, err)
				}
			}
			if winner < 0 {
				t.Fatal("nobody won")
			}
			wantContent(t, b, "k", fmt.Sprintf("writer-%d", winner))
		})
	}
}

func TestNewWriter(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			mustPut(t, b, "part.parquet", "old")
			w, err := b.NewWriter(ctx, "part.parquet")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"hello ", "streamed ", "world"} {
				if _, err := io.WriteString(w, s); err != nil {
					t.Fatal(err)
				}
			}
			// Before Close the old object is what readers and lists see.
			wantContent(t, b, "part.parquet", "old")
			if got := listKeys(t, b, "", ""); !slices.Equal(got, []string{"part.parquet"}) {
				t.Fatalf("List during write = %q", got)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantContent(t, b, "part.parquet", "hello streamed world")
		})
	}
}

func TestNewWriterCancelAbandons(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx, cancel := context.WithCancel(t.Context())
			w, err := b.NewWriter(ctx, "x/abandoned")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(w, "partial"); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := w.Close(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Close after cancel: err = %v, want context.Canceled", err)
			}
			if _, err := b.Stat(t.Context(), "x/abandoned"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Stat of abandoned object: err = %v, want ErrNotExist", err)
			}
			if b.Local() {
				wantNoSideFiles(t, b.dir)
			}
		})
	}
}

func TestOpenReader(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			mustPut(t, b, "f", "0123456789")
			r, size, err := b.OpenReader(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if size != 10 {
				t.Fatalf("size = %d, want 10", size)
			}
			for _, tc := range []struct {
				name    string
				off     int64
				n       int
				want    string
				wantEOF bool
			}{
				{"middle", 3, 4, "3456", false},
				{"whole", 0, 10, "0123456789", false},
				{"past end", 8, 4, "89", true},
				{"at end", 10, 1, "", true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p := make([]byte, tc.n)
					n, err := r.ReadAt(p, tc.off)
					if string(p[:n]) != tc.want {
						t.Errorf("ReadAt = %q, want %q", p[:n], tc.want)
					}
					if tc.wantEOF != (err == io.EOF) || (!tc.wantEOF && err != nil) {
						t.Errorf("ReadAt err = %v, want EOF=%v", err, tc.wantEOF)
					}
				})
			}
			if _, _, err := b.OpenReader(ctx, "missing"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("OpenReader missing: err = %v, want ErrNotExist", err)
			}
		})
	}
}

func TestStatDelete(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			ctx := t.Context()
			mustPut(t, b, "d/f", "12345")
			obj, err := b.Stat(ctx, "d/f")
			if err != nil {
				t.Fatal(err)
			}
			if obj.Key != "d/f" || obj.Size != 5 || obj.ModTime.IsZero() {
				t.Fatalf("Stat = %+v", obj)
			}
			if _, err := b.Stat(ctx, "d"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Stat of a directory: err = %v, want ErrNotExist", err)
			}
			if err := b.Delete(ctx, "d/f"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Stat(ctx, "d/f"); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Stat after Delete: err = %v, want ErrNotExist", err)
			}
			if err := b.Delete(ctx, "d/f"); err != nil {
				t.Fatalf("Delete of a missing object: %v", err)
			}
		})
	}
}

func TestList(t *testing.T) {
	// "a-b" sorts before "a/x" but a directory walk visits a/ first.
	keys := []string{"a/x", "a-b", "_delta_log/00000000000000000002.json", "_delta_log/00000000000000000000.json",
		"_delta_log/00000000000000000001.json", "_delta_log/_last_checkpoint", "b=1/part-0.parquet", "a/y/z", ".hidden.crc"}
	all := slices.Sorted(slices.Values(keys))
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			for _, k := range keys {
				mustPut(t, b, k, k)
			}
			for _, tc := range []struct {
				name, prefix, startAfter string
				want                     []string
			}{
				{"all", "", "", all},
				{"log", "_delta_log/", "", []string{"_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json",
					"_delta_log/00000000000000000002.json", "_delta_log/_last_checkpoint"}},
				{"log after version 0", "_delta_log/", "_delta_log/00000000000000000000.json", []string{
					"_delta_log/00000000000000000001.json", "_delta_log/00000000000000000002.json", "_delta_log/_last_checkpoint"}},
				{"start after a key that does not exist", "_delta_log/0", "_delta_log/00000000000000000001", []string{
					"_delta_log/00000000000000000001.json", "_delta_log/00000000000000000002.json"}},
				{"partial segment prefix", "a", "", []string{"a-b", "a/x", "a/y/z"}},
				{"directory prefix", "a/", "", []string{"a/x", "a/y/z"}},
				{"no match", "zzz", "", nil},
				{"missing directory", "nodir/x/", "", nil},
				{"start after everything", "", "~", nil},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if got := listKeys(t, b, tc.prefix, tc.startAfter); !slices.Equal(got, tc.want) {
						t.Errorf("List(%q, %q) = %q, want %q", tc.prefix, tc.startAfter, got, tc.want)
					}
				})
			}
			t.Run("objects", func(t *testing.T) {
				for o, err := range b.List(t.Context(), "a/y/", "") {
					if err != nil || o.Key != "a/y/z" || o.Size != int64(len("a/y/z")) || o.ModTime.IsZero() {
						t.Errorf("List yielded %+v, %v", o, err)
					}
				}
			})
			t.Run("cancelled", func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				var errs int
				for _, err := range b.List(ctx, "", "") {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("List with a cancelled ctx yielded err = %v", err)
					}
					errs++
				}
				if errs != 1 {
					t.Errorf("List with a cancelled ctx yielded %d errors, want 1", errs)
				}
			})
			t.Run("break", func(t *testing.T) {
				n := 0
				for range b.List(t.Context(), "", "") {
					n++
					break
				}
				if n != 1 {
					t.Errorf("iterations after break = %d", n)
				}
			})
		})
	}
}

func TestInvalidKeys(t *testing.T) {
	b := openers[0].open(t)
	for _, key := range []string{"", "/abs", "a//b", "a/", "../escape", "a/./b", "a/../b", "ctl\x01", `back\slash`, "a/.b" + tempMarker + "00"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			if err := b.Put(t.Context(), key, nil); !errors.Is(err, writers.ErrInvalid) {
				t.Errorf("Put: err = %v, want ErrInvalid", err)
			}
			if _, err := b.Get(t.Context(), key); !errors.Is(err, writers.ErrInvalid) {
				t.Errorf("Get: err = %v, want ErrInvalid", err)
			}
		})
	}
	for _, err := range b.List(t.Context(), "/x", "") {
		if !errors.Is(err, writers.ErrInvalid) {
			t.Errorf("List(/x): err = %v, want ErrInvalid", err)
		}
	}
}

// wantNoSideFiles fails if dir holds a temporary or fileblob ".attrs" file.
func wantNoSideFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if isTempName(d.Name()) || strings.HasSuffix(d.Name(), ".attrs") {
			t.Errorf("side file left behind: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFileLeavesNoSideFiles(t *testing.T) {
	b := openers[0].open(t)
	ctx := t.Context()
	mustPut(t, b, "a/b", "x")
	mustPut(t, b, "a/b", "y")
	if err := b.PutIfAbsent(ctx, "a/c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "a/c", []byte("x")); !errors.Is(err, ErrAlreadyExists) {
		t.Fatal(err)
	}
	w, err := b.NewWriter(ctx, "a/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantNoSideFiles(t, b.dir)
}

func TestListHidesTempFiles(t *testing.T) {
	b := openers[0].open(t)
	mustPut(t, b, "a/b", "x")
	// A write in flight (or stranded by a crash) leaves a temporary file.
	if err := os.WriteFile(tempPath(b.path("a/c")), []byte("partial"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, b, "", ""); !slices.Equal(got, []string{"a/b"}) {
		t.Fatalf("List = %q, want only a/b", got)
	}
}

func TestMemSharedAcrossOpens(t *testing.T) {
	name := memName(t)
	b1, err := Open(t.Context(), "mem://"+name+"/table", Options{}) // closed below
	if err != nil {
		t.Fatal(err)
	}
	b2 := mustOpen(t, "mem://"+name+"/table", Options{})
	other := mustOpen(t, "mem://"+name+"/other", Options{})
	mustPut(t, b1, "k", "v")
	wantContent(t, b2, "k", "v")
	if err := b2.PutIfAbsent(t.Context(), "k", []byte("w")); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent through the second Open: err = %v, want ErrAlreadyExists", err)
	}
	if _, err := other.Get(t.Context(), "k"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("another prefix sees the key: err = %v", err)
	}
	for range 2 { // Close is idempotent
		if err := b1.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wantContent(t, b2, "k", "v") // closing one Open leaves the shared data
}

func TestFileRoot(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		name, uri string
		want      string
	}{
		{"dot relative", "file://./data/t1", filepath.Join(base, "data/t1")},
		{"bare relative", "file://data/t2", filepath.Join(base, "data/t2")},
		{"parent relative", "file://../" + filepath.Base(base) + "/t3", filepath.Join(base, "t3")},
		{"absolute", "file://" + base + "/abs/t4", filepath.Join(base, "abs/t4")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustOpen(t, tc.uri, Options{BaseDir: base})
			if got, want := b.URI(), "file://"+tc.want; got != want {
				t.Errorf("URI() = %q, want %q", got, want)
			}
			// Opening is side-effect free (quiver check probes this way);
			// the first write creates the root.
			if _, err := os.Stat(tc.want); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Open created or found the root: %v", err)
			}
			for _, err := range b.List(t.Context(), "", "") {
				t.Fatalf("listing a missing root: %v", err)
			}
			mustPut(t, b, "x/y", "data")
			if got, err := os.ReadFile(filepath.Join(tc.want, "x", "y")); err != nil || !bytes.Equal(got, []byte("data")) {
				t.Fatalf("file on disk = %q, %v", got, err)
			}
		})
	}
}

func TestCheckObjects(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			b := o.open(t)
			mustPut(t, b, "a/one", "1")
			mustPut(t, b, "two", "22")
			ok := []Expected{{Key: "a/one", Size: 1, Label: "d0"}, {Key: "two", Size: 2, Label: "d1"}}
			if err := b.CheckObjects(t.Context(), ok); err != nil {
				t.Fatalf("CheckObjects of existing objects: %v", err)
			}
			if err := b.CheckObjects(t.Context(), nil); err != nil {
				t.Fatalf("CheckObjects of nothing: %v", err)
			}
			for _, tc := range []struct {
				name string
				bad  Expected
				want string
			}{
				{"missing", Expected{Key: "a/none", Size: 1, Label: "d2"}, `d2: file "a/none" does not exist`},
				{"size", Expected{Key: "two", Size: 3, Label: "d2"}, `d2: file "two" has 2 bytes`},
				{"escaping", Expected{Key: "../two", Size: 2, Label: "d2"}, `d2: file "../two" is not a valid key`},
				{"absolute", Expected{Key: "/two", Size: 2, Label: "d2"}, `d2: file "/two" is not a valid key`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					// The first failure in order is reported, whichever stat ends first.
					err := b.CheckObjects(t.Context(), append(slices.Clone(ok), tc.bad, Expected{Key: "x", Label: "d3"}))
					if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("CheckObjects: %v, want ErrInvalid containing %q", err, tc.want)
					}
				})
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := b.CheckObjects(ctx, ok); err != nil && errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("CheckObjects with a cancelled ctx: %v, want no ErrInvalid", err)
			}
		})
	}
}

// TestNewWriterSyncsAhead checks that a file:// writer syncs what it has
// written in the background from syncAheadBytes on, and again at once
// what arrived during a sync, so that Close's fsync finds little left to
// write, and that a background sync's failure fails
// the file (the kernel reports a lost write once: the final fsync could
// succeed after it) with nothing published.
func TestNewWriterSyncsAhead(t *testing.T) {
	write := func(t *testing.T, b *Bucket) ([]byte, error) {
		w, err := b.NewWriter(t.Context(), "data/part")
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range 70 { // 70 writes of 100,000 bytes: 7,000,000 bytes
			chunk := bytes.Repeat([]byte{byte(i)}, 100_000)
			want = append(want, chunk...)
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
		return want, w.Close()
	}
	defer func(f func(*os.File) error) { syncData = f }(syncData)

	t.Run("ahead", func(t *testing.T) {
		var sizes []int64 // the file's size at each background sync
		syncData = func(f *os.File) error {
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			sizes = append(sizes, fi.Size())
			return f.Sync()
		}
		b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
		want, err := write(t, b)
		if err != nil {
			t.Fatal(err)
		}
		wantContent(t, b, "data/part", string(want))
		// The first sync starts once 2 MiB are written (the hook sees the
		// file when its goroutine runs: maybe larger), later ones only
		// after the one before ended, each seeing more.
		if len(sizes) == 0 || sizes[0] < syncAheadBytes {
			t.Fatalf("background syncs at sizes %v: want the first at %d bytes or more", sizes, syncAheadBytes)
		}
		if len(sizes) > 7_000_000/syncAgainBytes+1 {
			t.Fatalf("%d background syncs of 7,000,000 bytes: want one per %d bytes at most", len(sizes), syncAgainBytes)
		}
		for i := 1; i < len(sizes); i++ {
			if sizes[i] <= sizes[i-1] {
				t.Fatalf("background syncs at sizes %v: want each to see more", sizes)
			}
		}
	})
	t.Run("catches up", func(t *testing.T) {
		// What is written while a background sync runs is synced right
		// after it, without waiting for another write: the end of a
		// burst of writes does not wait for the final fsync.
		started := make(chan int64, 4)
		release := make(chan struct{})
		syncData = func(f *os.File) error {
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			started <- fi.Size()
			<-release
			return nil
		}
		b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
		w, err := b.NewWriter(t.Context(), "data/part")
		if err != nil {
			t.Fatal(err)
		}
		next := func() int64 {
			t.Helper()
			select {
			case n := <-started:
				return n
			case <-time.After(10 * time.Second):
				t.Fatal("no background sync started")
				return 0
			}
		}
		if _, err := w.Write(make([]byte, syncAheadBytes)); err != nil {
			t.Fatal(err)
		}
		if n := next(); n != syncAheadBytes {
			t.Fatalf("first background sync saw %d bytes, want %d", n, syncAheadBytes)
		}
		if _, err := w.Write(make([]byte, 1<<20)); err != nil { // during the first sync
			t.Fatal(err)
		}
		release <- struct{}{}
		if n := next(); n != syncAheadBytes+1<<20 {
			t.Fatalf("second background sync saw %d bytes, want %d", n, syncAheadBytes+1<<20)
		}
		close(release)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		// Data written after the write is abandoned is not synced: Close
		// removes it (a rollback does not wait for the disk).
		syncs := 0
		syncData = func(*os.File) error { syncs++; return nil }
		b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		w, err := b.NewWriter(ctx, "data/part")
		if err != nil {
			t.Fatal(err)
		}
		for range 70 {
			if _, err := w.Write(make([]byte, 100_000)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close of an abandoned write: %v, want context.Canceled", err)
		}
		if syncs != 0 {
			t.Fatalf("%d background syncs of an abandoned write, want none", syncs)
		}
	})
	t.Run("failed", func(t *testing.T) {
		syncData = func(*os.File) error { return syscall.EIO }
		b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
		if _, err := write(t, b); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Close after a failed background sync: %v, want EIO", err)
		}
		if _, err := b.Stat(t.Context(), "data/part"); !errors.Is(err, ErrNotExist) {
			t.Fatalf("Stat of a file whose background sync failed: %v, want ErrNotExist", err)
		}
		wantNoSideFiles(t, b.dir)
	})
}
