package writers_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// A panic on a goroutine becomes that goroutine's error, of no class,
// with its stack.
func TestRecover(t *testing.T) {
	var err error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer writers.Recover(&err)
		panic(writers.Errorf(writers.ErrInvalid, "a classed value"))
	})
	wg.Wait()
	var pe *writers.PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "panic: a classed value") {
		t.Fatalf("error %v, want a PanicError", err)
	}
	if errors.Is(err, writers.ErrInvalid) {
		t.Fatal("a panic must not take its value's class: it is internal")
	}
	if stack := writers.PanicStack(err); !strings.Contains(stack, "TestRecover") {
		t.Fatalf("stack %q does not show where the panic was", stack)
	}
	if writers.PanicStack(errors.New("plain")) != "" {
		t.Fatal("a plain error has no panic stack")
	}

	//lint:ignore SA5000 the nil map's panic is what Guard must turn into an error
	if err := writers.Guard(func() error { var m map[string]int; m["x"]++; return nil })(); writers.PanicStack(err) == "" {
		t.Fatalf("Guard: error %v, want the panic", err)
	}
	want := errors.New("returned")
	if err := writers.Guard(func() error { return want })(); err != want {
		t.Fatalf("Guard: error %v, want f's own", err)
	}
}
