package redact

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"s3://bucket/t", "s3://bucket/t"},
		{"/data/tables/t", "/data/tables/t"},
		{"topic events", "topic events"},
		{"s3://AKIA:s3cret@bucket/t", "s3://REDACTED@bucket/t"},
		{"s3://bucket/t?region=eu&endpoint=http://AKIA:s3cret@minio:9000", "s3://bucket/t?region=REDACTED&endpoint=REDACTED"},
		{"s3://bucket/t?endpoint=http%3A%2F%2Fk%3As%40h", "s3://bucket/t?endpoint=REDACTED"},
		{"gs://b/t?tok3n", "gs://b/t?REDACTED"},
		{"s3://b/t#frag", "s3://b/t"},
		{"http://u@h:1/%zz?x=%zz", "http://REDACTED@h:1/%zz?x=REDACTED"},
	}
	for _, tt := range tests {
		if got := URI(tt.in); got != tt.want {
			t.Errorf("URI(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	in := `storage: open s3://k:SECRET@b/t?endpoint=http://u:SECRET@m:9000: permission denied (see "gs://x/y?key=SECRET"), file:///tmp/a.`
	got := Text(in)
	if strings.Contains(got, "SECRET") {
		t.Fatalf("Text left a secret: %q", got)
	}
	want := `storage: open s3://REDACTED@b/t?endpoint=REDACTED: permission denied (see "gs://x/y?key=REDACTED"), file:///tmp/a.`
	if got != want {
		t.Errorf("Text = %q\nwant   %q", got, want)
	}
	if s := "no uri here: /a/b?c"; Text(s) != s {
		t.Errorf("Text changed %q", s)
	}
}

func TestHandler(t *testing.T) {
	var b strings.Builder
	log := slog.New(Handler(slog.NewTextHandler(&b, nil))).With("table", "s3://k:SECRET@b/t")
	log.Warn("open s3://b/t?key=SECRET failed", "err", errors.New("GET http://u:SECRET@h/x: refused"),
		slog.Group("g", "uri", "gs://b?token=SECRET"), "list", []string{"s3://x?k=SECRET"})
	if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), "s3://REDACTED@b/t") {
		t.Errorf("log line left a secret or lost the table: %s", b.String())
	}
}
