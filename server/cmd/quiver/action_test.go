package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAction(t *testing.T) {
	addr := startQuiver(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, when set
		says   string // in stdout (code 0) or stderr
	}{
		{"health, default body", []string{"health"}, 0, "{\n  \"status\": \"ok\",\n  \"endpoints\": {\n    \"devnull\": \"ok\"\n  },\n  \"journal\": \"ok\"\n}\n", ""},
		{"compact", []string{"--compact", "committed-epoch", `{"endpoint":"devnull","writer":"w"}`}, 0,
			`{"endpoint":"devnull","writer":"w","epoch":null}` + "\n", ""},
		{"rollback of an unknown transaction", []string{"rollback", `{"writer":"w","epoch":3}`}, 0, "", `"state": "aborted"`},
		{"unknown action", []string{"explode"}, 1, "", `unknown action "explode"`},
		{"bad JSON body", []string{"status", "{writer:w}"}, 2, "", "not valid JSON"},
		{"no name", nil, 2, "", "give the action NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"action", "--addr", addr}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d (stderr %q), want %d", code, stderr, tt.code)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
			if out := map[bool]string{true: stdout, false: stderr}[code == 0]; !strings.Contains(out, tt.says) {
				t.Errorf("output %q lacks %q", out, tt.says)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	addr := startQuiver(t)
	code, stdout, stderr := runCmd("endpoints", "--addr", addr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "NAME     SINK     MODE  SCHEMA\ndevnull  discard  -     (none yet)\n"; stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", stdout, want)
	}
	code, stdout, stderr = runCmd("endpoints", "--addr", addr, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var eps []map[string]any
	if err := json.Unmarshal([]byte(stdout), &eps); err != nil || len(eps) != 1 || eps[0]["name"] != "devnull" || eps[0]["sink"] != "discard" {
		t.Errorf("--json output %q: %v", stdout, err)
	}
}
