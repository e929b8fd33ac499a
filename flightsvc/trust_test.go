package flightsvc_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// precommitted writes rows to (writer, epoch) on each endpoint, precommits
// and returns the sealed descriptors by endpoint.
func (s *server) precommitted(ctx context.Context, writer string, epoch int64, rows map[string]int) map[string]string {
	s.t.Helper()
	for ep, n := range rows {
		if _, err := s.put(ctx, txnDesc(ep, writer, epoch), n); err != nil {
			s.t.Fatal(err)
		}
	}
	body, _ := json.Marshal(map[string]any{"writer": writer, "epoch": epoch})
	pre, err := s.action(ctx, "precommit", string(body))
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pre["participants"].([]any) {
		p := p.(map[string]any)
		out[p["endpoint"].(string)] = p["descriptor"].(string)
	}
	return out
}

func commitBody(writer string, epoch int64, descs map[string][]string) string {
	b, _ := json.Marshal(map[string]any{"writer": writer, "epoch": epoch, "descriptors": descs})
	return string(b)
}

// Handed-over descriptors must be sealed by a server with the same key,
// for the same endpoint and transaction, and unedited; a refused one stops
// the commit before anything is decided.
func TestHandedDescriptorsAreVerified(t *testing.T) {
	events, users := discard.New(nil), discard.New(nil)
	key := descseal.GenerateKey()
	first := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": events, "users": users}, descriptorKey: key})
	second := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": events.Peer(), "users": users.Peer()}, descriptorKey: key})
	otherKey := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": events.Peer()}})

	peer := second.precommitted(t.Context(), "job", 1, map[string]int{"events": 7, "users": 3})
	otherTxn := second.precommitted(t.Context(), "job", 2, map[string]int{"events": 1})
	foreign := otherKey.precommitted(t.Context(), "job", 1, map[string]int{"events": 2})
	own := first.precommitted(t.Context(), "job", 1, map[string]int{"events": 5})

	sealed, _ := base64.StdEncoding.DecodeString(peer["events"])
	edit := func(i int) string {
		b := append([]byte(nil), sealed...)
		b[i] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	raw := base64.StdEncoding.EncodeToString(sealed[33:]) // the sink's own bytes
	cases := []struct {
		name  string
		descs map[string][]string
		index string
	}{
		{"edited payload", map[string][]string{"events": {edit(len(sealed) - 2)}}, `descriptors["events"][0]`},
		{"edited tag", map[string][]string{"events": {edit(3)}}, `descriptors["events"][0]`},
		{"unsealed", map[string][]string{"events": {raw}}, `descriptors["events"][0]`},
		{"for another endpoint", map[string][]string{"events": {peer["users"]}}, `descriptors["events"][0]`},
		{"of another transaction", map[string][]string{"events": {otherTxn["events"]}}, `descriptors["events"][0]`},
		{"from a server with another key", map[string][]string{"events": {foreign["events"]}}, `descriptors["events"][0]`},
		{"second of a list", map[string][]string{"events": {peer["events"], edit(40)}}, `descriptors["events"][1]`},
		{"one endpoint of two", map[string][]string{"events": {peer["events"]}, "users": {peer["events"]}}, `descriptors["users"][0]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := first.action(t.Context(), "commit", commitBody("job", 1, tc.descs))
			wantCode(t, err, codes.PermissionDenied, tc.index, `(endpoint "`, "not verified", "txn.descriptor_key_file")
		})
	}
	if got := first.mustAction("status", `{"writer":"job","epoch":1}`); got["state"] != "precommitted" {
		t.Fatalf("after refused commits: %v, want still precommitted (nothing decided)", got)
	}
	if e, u := events.Committed().Rows, users.Committed().Rows; e != 0 || u != 0 {
		t.Fatalf("refused commits published events=%d users=%d rows", e, u)
	}

	// The peer's descriptors and our own, handed back, commit once each.
	good := map[string][]string{"events": {own["events"], peer["events"]}, "users": {peer["users"]}}
	if com := first.mustAction("commit", commitBody("job", 1, good)); com["state"] != "committed" {
		t.Fatalf("commit %v", com)
	}
	if e, u := events.Committed().Rows, users.Committed().Rows; e != 12 || u != 3 {
		t.Fatalf("committed events=%d users=%d, want 12 (5 own + 7 handed) and 3", e, u)
	}
}

// singleWriter is a sink that publishes one descriptor per commit, as
// Delta upsert and Lance merge_insert do.
type singleWriter struct{ *discard.Writer }

func (w singleWriter) Contract() writers.Contract {
	c := w.Writer.Contract()
	c.AggregatesDescriptors = false
	return c
}

func TestHandedDescriptorsToSingleDescriptorEndpoint(t *testing.T) {
	table := discard.New(nil)
	key := descseal.GenerateKey()
	first := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"items": singleWriter{table}}, descriptorKey: key})
	second := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"items": singleWriter{table.Peer()}}, descriptorKey: key})
	peer := second.precommitted(t.Context(), "job", 1, map[string]int{"items": 7})
	own := first.precommitted(t.Context(), "job", 1, map[string]int{"items": 5})

	_, err := first.action(t.Context(), "commit", commitBody("job", 1, map[string][]string{"items": {own["items"], peer["items"]}}))
	wantCode(t, err, codes.InvalidArgument, `descriptors["items"][1]`, `endpoint "items"`, "one descriptor per commit")
	if got := table.Committed().Rows; got != 0 {
		t.Fatalf("refused commit published %d rows", got)
	}
	// Its own descriptor handed back is harmless.
	if com := first.mustAction("commit", commitBody("job", 1, map[string][]string{"items": {own["items"]}})); com["state"] != "committed" {
		t.Fatalf("commit %v", com)
	}
	if got := table.Committed().Rows; got != 5 {
		t.Fatalf("committed %d rows, want 5", got)
	}
}

const (
	tenantSecret = "s3cret-tenant"
	rootSecret   = "s3cret-root"
)

// A token limited to devnull cannot read, precommit, commit, roll back,
// join or fence a transaction on events; errors do not name events. Those
// of root's transactions it names are NotFound (not its own, #33 item 4),
// fencing and handed descriptors PermissionDenied.
func TestTransactionActionsRespectGrants(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens: []flightsvc.Token{
			{Name: "tenant", Secret: tenantSecret, Endpoints: []string{"devnull"}, Actions: []string{"*"}},
			{Name: "root", Secret: rootSecret, Endpoints: []string{"*"}, Actions: []string{"*"}},
		},
	})
	root := bearer(t.Context(), rootSecret)
	desc := s.precommitted(root, "job", 1, map[string]int{"events": 4})["events"]
	if _, err := s.put(root, txnDesc("events", "job", 2), 1); err != nil {
		t.Fatal(err)
	}

	tenant := bearer(t.Context(), tenantSecret)
	action := func(typ, body string) func() error {
		return func() error { _, err := s.action(tenant, typ, body); return err }
	}
	put := func(writer string, epoch int64) func() error {
		return func() error { _, err := s.put(tenant, txnDesc("devnull", writer, epoch), 1); return err }
	}
	for name, c := range map[string]struct {
		call func() error
		code codes.Code
	}{
		"status":               {action("status", `{"writer":"job","epoch":1}`), codes.NotFound},
		"precommit":            {action("precommit", `{"writer":"job","epoch":2}`), codes.NotFound},
		"commit":               {action("commit", `{"writer":"job","epoch":1}`), codes.NotFound},
		"rollback":             {action("rollback", `{"writer":"job","epoch":1}`), codes.NotFound},
		"rollback open":        {action("rollback", `{"writer":"job","epoch":2}`), codes.NotFound},
		"begin existing":       {action("begin", `{"writer":"job","epoch":2}`), codes.NotFound},
		"begin fencing":        {action("begin", `{"writer":"job","epoch":3}`), codes.PermissionDenied},
		"join":                 {put("job", 2), codes.NotFound},
		"join fencing":         {put("job", 3), codes.PermissionDenied},
		"commit with own body": {action("commit", commitBody("job", 1, map[string][]string{"devnull": {desc}})), codes.PermissionDenied},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.call()
			wantCode(t, err, c.code)
			if msg := err.Error(); strings.Contains(msg, "events") || strings.Contains(msg, desc) {
				t.Fatalf("refusal reveals the transaction: %v", err)
			}
		})
	}
	_, err := s.action(tenant, "commit", commitBody("other", 1, map[string][]string{"events": {desc}}))
	wantCode(t, err, codes.PermissionDenied, `token "tenant"`, `endpoint "events"`)

	if st := s.mustActionCtx(root, "status", `{"writer":"job","epoch":1}`); st["state"] != "precommitted" {
		t.Fatalf("job@1 %v, want untouched", st["state"])
	}
	if st := s.mustActionCtx(root, "status", `{"writer":"job","epoch":2}`); st["state"] != "open" {
		t.Fatalf("job@2 %v, want open (not fenced)", st["state"])
	}
	if got := s.sinks["events"].Committed().Rows; got != 0 {
		t.Fatalf("events committed %d rows", got)
	}

	// The tenant's own writer works end to end.
	s.precommitted(tenant, "mine", 1, map[string]int{"devnull": 3})
	if _, err := s.action(tenant, "commit", `{"writer":"mine","epoch":1}`); err != nil {
		t.Fatal(err)
	}
	if got := s.sinks["devnull"].Committed().Rows; got != 3 {
		t.Fatalf("devnull committed %d rows, want 3", got)
	}
}

// NotFound answers and health show a restricted token nothing of the
// endpoints it may not use.
func TestEndpointNamesDoNotLeak(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens: []flightsvc.Token{
			{Name: "tenant", Secret: tenantSecret, Endpoints: []string{"devnull"}, Actions: []string{"*"}},
			{Name: "root", Secret: rootSecret, Endpoints: []string{"*"}, Actions: []string{"*"}},
		},
	})
	tenant := bearer(t.Context(), tenantSecret)
	for name, call := range map[string]func() error{
		"getschema": func() error { _, err := s.client.GetSchema(tenant, pathDesc("nope")); return err },
		"doput":     func() error { _, err := s.put(tenant, pathDesc("nope"), 1); return err },
		"committed-epoch": func() error {
			_, err := s.action(tenant, "committed-epoch", `{"endpoint":"nope","writer":"w"}`)
			return err
		},
		"commit": func() error {
			_, err := s.action(tenant, "commit", commitBody("w", 1, map[string][]string{"nope": {""}}))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := call()
			// The same answer as for an existing endpoint it may not use.
			wantCode(t, err, codes.PermissionDenied, `"nope"`, "it may use: devnull")
			if strings.Contains(err.Error(), "events") {
				t.Fatalf("reveals endpoint events: %v", err)
			}
		})
	}
	health := s.mustActionCtx(tenant, "health", "")
	if eps := health["endpoints"].(map[string]any); !reflect.DeepEqual(eps, map[string]any{"devnull": "ok"}) {
		t.Fatalf("health for tenant %v, want devnull only", eps)
	}
	root := bearer(t.Context(), rootSecret)
	_, err := s.client.GetSchema(root, pathDesc("nope"))
	wantCode(t, err, codes.NotFound, `"nope"`, "devnull, events")
	if eps := s.mustActionCtx(root, "health", "")["endpoints"].(map[string]any); len(eps) != 2 {
		t.Fatalf("health for root %v, want both endpoints", eps)
	}
}

func (s *server) mustActionCtx(ctx context.Context, typ, body string) map[string]any {
	s.t.Helper()
	m, err := s.action(ctx, typ, body)
	if err != nil {
		s.t.Fatalf("action %s %s: %v", typ, body, err)
	}
	return m
}
