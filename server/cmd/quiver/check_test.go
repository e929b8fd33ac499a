package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckCommand(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		stdout  string
		wantErr string
	}{
		{
			name:   "every endpoint passes",
			doc:    "endpoints:\n  - {name: devnull, sink: discard}\n  - {name: events, sink: discard}\n",
			stdout: "ok  devnull (discard)\nok  events (discard)\n",
		},
		{
			name:    "config error",
			doc:     "lisen: 127.0.0.1:1\nendpoints: [{name: devnull, sink: discard}]\n",
			wantErr: `line 1: unknown key "lisen" (did you mean "listen"?)`,
		},
		{
			// Passed check once and then refused every message.
			name:    "message limit beyond gRPC's",
			doc:     "limits: {max_message_bytes: 4611686018427387904, endpoint_buffer_bytes: 4611686018427387904}\nendpoints: [{name: devnull, sink: discard}]\n",
			wantErr: `line 1: limits.max_message_bytes: must be from 1 to 1072693248 (1023 MiB)`,
		},
		{
			name:    "short descriptor key",
			doc:     "txn: {descriptor_key_file: /dev/null}\nendpoints: [{name: devnull, sink: discard}]\n",
			wantErr: `line 1: txn.descriptor_key_file: /dev/null: descriptor key has 0 bytes, need at least 32`,
		},
		{
			name:    "sink not in this build",
			doc:     "endpoints: [{name: events, sink: hdfs}]\n",
			wantErr: `endpoints[0].sink: sink "hdfs" is not available in this build (available: `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := runCheck(t.Context(), []string{"--config", writeConfig(t, tt.doc)}, &stdout, &stderr)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("check: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("check: %v, want an error containing %q", err, tt.wantErr)
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.stdout)
			}
		})
	}
}

func TestCheckExitStatus(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run(t.Context(), []string{"check", "--config", writeConfig(t, "endpoints: [{name: x, sink: nope}]\n")}, &stdout, &stderr); code != 1 {
		t.Errorf("exit status %d for a bad config, want 1; stderr:\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(stderr.String(), "quiver check: config ") {
		t.Errorf("stderr = %q", stderr.String())
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"check"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--config FILE is required") {
		t.Errorf("check without --config: exit %d, stderr %q", code, stderr.String())
	}
}
