package reftool

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records how Missing ended it. Skip and
// Fatal end the calling goroutine (runtime.Goexit), as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, args[0].(string)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, args[0].(string)
	runtime.Goexit()
}

func run(tb testing.TB) *recorder {
	r := &recorder{TB: tb}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Missing(r, "kcat", errors.New("not in PATH"))
		r.msg = "Missing returned"
	}()
	wg.Wait()
	return r
}

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		ci           string
		skip, failed bool
	}{{"", true, false}, {"false", true, false}, {"1", true, false}, {"true", false, true}} {
		t.Setenv("CI", tc.ci)
		r := run(t)
		if r.skipped != tc.skip || r.failed != tc.failed {
			t.Errorf("CI=%q: skipped=%v failed=%v (%q), want skipped=%v failed=%v", tc.ci, r.skipped, r.failed, r.msg, tc.skip, tc.failed)
		}
		if !strings.Contains(r.msg, "kcat") || !strings.Contains(r.msg, "not in PATH") {
			t.Errorf("CI=%q: message %q names neither the tool nor the reason", tc.ci, r.msg)
		}
	}
}
