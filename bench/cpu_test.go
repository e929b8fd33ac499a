package bench

import (
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a ')' of its own; utime 1234, stime 66.
	line := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 66 0 0 20 0 57 0 123 456 789\n"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 13 * time.Second; got != want {
		t.Errorf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "12 (x S 1 2", "12 (x) S 1 2 3", "12 (x) S 1 2 3 4 5 6 7 8 9 10 u 5"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) = nil error", bad)
		}
	}
}

func TestCPUOfSelfGrows(t *testing.T) {
	if runtime.GOOS != "linux" {
		// No /proc: CPUOf must say so rather than report zero.
		if d, err := CPUOf(0); err == nil {
			t.Fatalf("CPUOf(0) = %v, nil without /proc", d)
		}
		return
	}
	before, err := CPUOf(0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for {
		for i := range 1 << 20 {
			x += i
		}
		after, err := CPUOf(0)
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPUOf(0) stayed at %v through 10 s of spinning (x=%d)", before, x)
		}
	}
}
