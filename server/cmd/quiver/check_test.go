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

// TestCheckRedactsCredentials: table URIs with a credential in their
// userinfo and in endpoint= fail their probe, and quiver check names
// them without the credential, on stdout and stderr. (Before, it printed
// the URIs verbatim.)
func TestCheckRedactsCredentials(t *testing.T) {
	const secret = "SeCrEt"
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-shown-anywhere")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	doc := `endpoints:
  - name: userinfo
    sink: delta
    delta: {table_uri: "s3://AKIA:` + secret + `1@bucket/t?region=us-east-1"}
  - name: endpointparam
    sink: delta
    delta: {table_uri: "s3://bucket/t?region=us-east-1&use_path_style=true&endpoint=http://AKIA:` + secret + `2@127.0.0.1:1"}
`
	var stdout, stderr strings.Builder
	code := run(t.Context(), []string{"check", "--config", writeConfig(t, doc), "--timeout", "20s"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1 (both probes fail); stderr:\n%s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	if strings.Contains(out, secret) {
		t.Errorf("quiver check shows the credential:\n%s", out)
	}
	for _, want := range []string{"FAIL userinfo (delta): ", "s3://REDACTED@bucket/t?region=REDACTED", "FAIL endpointparam (delta): ", "endpoint=REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("quiver check output lacks %q:\n%s", want, out)
		}
	}
}
