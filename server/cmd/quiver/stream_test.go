package main

import (
	"io"
	"strings"
	"testing"
)

// withStdin makes quiver stream read r for the rest of the test.
func withStdin(t *testing.T, r io.Reader) {
	t.Helper()
	old := stdin
	stdin = r
	t.Cleanup(func() { stdin = old })
}

func TestStreamBadInvocations(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		input string
		code  int
		says  string
	}{
		{"no writer", []string{"stream", "--endpoint", "e"}, "", 2, "--endpoint and --writer are required"},
		{"no endpoint", []string{"stream", "--writer", "w"}, "", 2, "--endpoint and --writer are required"},
		{"a file argument", []string{"stream", "--endpoint", "e", "--writer", "w", "in.arrows"}, "", 2, "comes from stdin"},
		{"not arrow", []string{"stream", "--endpoint", "e", "--writer", "w"}, "this is not arrow", 1, "not an Arrow IPC stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withStdin(t, strings.NewReader(tt.input))
			code, stdout, stderr := runCmd(tt.args...)
			if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.says) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d mentioning %q", code, stdout, stderr, tt.code, tt.says)
			}
		})
	}
}
