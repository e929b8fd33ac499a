package server

import (
	"strings"
	"testing"
	"time"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
)

// TestCredentialsNeverShown: table URIs carrying a credential in their
// userinfo and in the endpoint= query parameter fail to open, and nothing
// a person reads shows the credential: the health action, /readyz (with
// a token: the reasons, redacted; without: only "ready"), the status
// API, the error a client gets, and the log. They still name the
// endpoints and the URIs' hosts and keys. (Before, all of them echoed
// the URIs verbatim.)
func TestCredentialsNeverShown(t *testing.T) {
	const secret = "SeCrEt"
	t.Setenv("QUIVER_TEST_REDACT_TOKEN", "admin-token")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-shown-anywhere")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	s := startServerWith(t, t.TempDir(), `auth:
  tokens:
    - {name: ops, token_env: QUIVER_TEST_REDACT_TOKEN, endpoints: ["*"], actions: ["*"]}
endpoints:
  - {name: devnull, sink: discard}
  - name: userinfo
    sink: delta
    delta: {table_uri: "s3://AKIA:`+secret+`1@bucket/t?region=us-east-1"}
  - name: endpointparam
    sink: delta
    delta: {table_uri: "s3://bucket/t?region=us-east-1&use_path_style=true&endpoint=http://AKIA:`+secret+`2@127.0.0.1:1"}
`, Options{EndpointRetryMin: time.Hour, EndpointRetryMax: time.Hour})
	c, err := quiver.Dial(s.FlightAddr(), quiver.WithToken("admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	clean := func(what, text string, want ...string) {
		t.Helper()
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the credential:\n%s", what, text)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, text)
			}
		}
	}

	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" {
		t.Fatalf("health: %+v, %v; want degraded", h, err)
	}
	clean("health of userinfo", h.Endpoints["userinfo"], "s3://REDACTED@bucket/t?region=REDACTED")
	clean("health of endpointparam", h.Endpoints["endpointparam"], "endpoint=REDACTED")

	_, err = c.Put(ctx, "endpointparam", idReader(t, 1))
	if err == nil {
		t.Fatal("put to an endpoint that cannot open succeeded")
	}
	clean("the put's error", err.Error(), "endpoint=REDACTED")

	base := "http://" + s.HTTPAddr()
	if code, body := httpGet(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz without a token = %d %q, want 200 %q and nothing more", code, body, "ready\n")
	}
	code, body := httpGetToken(t, base+"/readyz", "admin-token")
	if code != 200 {
		t.Errorf("/readyz with a token = %d", code)
	}
	clean("/readyz with a token", body, "degraded: 2 of 3", "userinfo: ", "endpointparam: ", "REDACTED")
	code, body = httpGetToken(t, base+"/api/status", "admin-token")
	if code != 200 {
		t.Fatalf("/api/status = %d", code)
	}
	clean("/api/status", body, `"userinfo"`, "s3://bucket/t?region=REDACTED")
	testpoll.Until(t, "the failed opens to be logged", func() bool {
		return strings.Count(s.logs.String(), "the sink could not be opened") >= 2
	})
	clean("the log", s.logs.String(), "REDACTED")
}
