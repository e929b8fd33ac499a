package bench

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestTempDir(t *testing.T) {
	tests := []struct {
		name    string
		keep    bool
		wantLog bool
	}{
		{"removed", false, false},
		{"kept", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log strings.Builder
			dir, remove, err := TempDir("testbench", "tables", tt.keep, &log)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if got, want := log.String(), "testbench: tables in "+dir+"\n"; (got == want) != tt.wantLog {
				t.Errorf("log %q, want the folder printed: %v", got, tt.wantLog)
			}
			remove()
			_, err = os.Stat(dir)
			if gone := errors.Is(err, os.ErrNotExist); gone == tt.keep {
				t.Errorf("after remove, folder gone %v with keep %v (stat: %v)", gone, tt.keep, err)
			}
		})
	}
}
