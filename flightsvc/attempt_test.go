package flightsvc_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/writers"
)

// attemptDesc is a transactional descriptor naming attempt.
func attemptDesc(endpoint, writer string, epoch int64, attempt string) string {
	return fmt.Sprintf(`{"endpoint":%q,"writer":%q,"epoch":%d,"attempt":%q}`, endpoint, writer, epoch, attempt)
}

// TestReplayFromANewConnectionPublishesItsRowsOnce: a client puts a batch
// under (q, 7) and dies before precommit; its replay from a new
// connection is told to begin (a put naming no attempt neither joins nor
// drops the dead attempt's acknowledged rows), and after the begin the
// batch commits once. Before attempts the replay joined the dead
// client's transaction and the commit published both: 10 rows for 5.
func TestReplayFromANewConnectionPublishesItsRowsOnce(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "q", 7), 5); err != nil {
		t.Fatal(err)
	}
	replay := s.reconnected()
	_, err := replay.put(t.Context(), txnDesc("events", "q", 7), 5)
	wantCode(t, err, codes.FailedPrecondition, "begin the epoch again")
	attempt := replay.mustAction("begin", `{"writer":"q","epoch":7}`)["attempt"].(string)
	if _, err := replay.put(t.Context(), cmdDesc(attemptDesc("events", "q", 7, attempt)), 5); err != nil {
		t.Fatal(err)
	}
	replay.mustAction("precommit", `{"writer":"q","epoch":7}`)
	replay.mustAction("commit", `{"writer":"q","epoch":7}`)
	if got := s.sinks["events"].Committed().Rows; got != 5 {
		t.Fatalf("committed %d rows, want the batch once (5)", got)
	}
}

// TestBeginAfterPrecommitStartsClean: a client precommits and dies before
// commit; the replay's begin fences the precommitted attempt, so the
// replay's put, precommit and commit go through (before attempts the put
// was refused and every later try failed: the epoch was stuck). The dead
// attempt's descriptors are refused by a commit (FailedPrecondition
// naming it), and its own rollback no longer touches the new attempt.
func TestBeginAfterPrecommitStartsClean(t *testing.T) {
	s := startServer(t, serverConfig{})
	dead := s.mustAction("begin", `{"writer":"q","epoch":7}`)["attempt"].(string)
	if _, err := s.put(t.Context(), txnDesc("events", "q", 7), 5); err != nil {
		t.Fatal(err)
	}
	pre := s.mustAction("precommit", `{"writer":"q","epoch":7}`)
	stale := pre["participants"].([]any)[0].(map[string]any)["descriptor"].(string)

	replay := s.reconnected()
	begun := replay.mustAction("begin", `{"writer":"q","epoch":7}`)
	attempt := begun["attempt"].(string)
	if begun["state"] != "open" || attempt == dead {
		t.Fatalf("begin after precommit = %v, want a new open attempt", begun)
	}
	if _, err := s.put(t.Context(), cmdDesc(attemptDesc("events", "q", 7, dead)), 1); err == nil {
		t.Fatal("a put naming the fenced attempt was accepted")
	} else {
		wantCode(t, err, codes.FailedPrecondition, dead, "not the current attempt")
	}
	if got := s.mustAction("rollback", fmt.Sprintf(`{"writer":"q","epoch":7,"attempt":%q}`, dead)); got["attempt"] != attempt || got["state"] != "open" {
		t.Fatalf("rollback of the dead attempt = %v, want the new attempt untouched", got)
	}
	if _, err := replay.put(t.Context(), cmdDesc(attemptDesc("events", "q", 7, attempt)), 5); err != nil {
		t.Fatal(err)
	}
	replay.mustAction("precommit", fmt.Sprintf(`{"writer":"q","epoch":7,"attempt":%q}`, attempt))
	_, err := replay.action(t.Context(), "commit", fmt.Sprintf(`{"writer":"q","epoch":7,"descriptors":{"events":[%q]}}`, stale))
	wantCode(t, err, codes.FailedPrecondition, dead, "fenced or rolled back")
	done := replay.mustAction("commit", fmt.Sprintf(`{"writer":"q","epoch":7,"attempt":%q}`, attempt))
	if done["state"] != "committed" {
		t.Fatalf("commit = %v", done)
	}
	if got := s.sinks["events"].Committed().Rows; got != 5 {
		t.Fatalf("committed %d rows, want the replay's 5", got)
	}
}

// TestBeginResumeAdoptsThePrecommittedAttempt: begin with "resume" keeps a
// precommitted attempt, so a client resuming between precommit and commit
// commits what it precommitted.
func TestBeginResumeAdoptsThePrecommittedAttempt(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "q", 1), 4); err != nil {
		t.Fatal(err)
	}
	pre := s.mustAction("precommit", `{"writer":"q","epoch":1}`)
	got := s.reconnected().mustAction("begin", `{"writer":"q","epoch":1,"resume":true}`)
	if got["state"] != "precommitted" || got["attempt"] != pre["attempt"] {
		t.Fatalf("begin resume = %v, want the precommitted attempt %v", got, pre["attempt"])
	}
	s.mustAction("commit", fmt.Sprintf(`{"writer":"q","epoch":1,"attempt":%q}`, got["attempt"]))
	if rows := s.sinks["events"].Committed().Rows; rows != 4 {
		t.Fatalf("committed %d rows, want 4", rows)
	}
}

// TestAttemptFieldIsChecked: an empty or overlong attempt is
// InvalidArgument, in a descriptor and in an action body.
func TestAttemptFieldIsChecked(t *testing.T) {
	s := startServer(t, serverConfig{})
	_, err := s.put(t.Context(), cmdDesc(attemptDesc("events", "q", 1, "")), 1)
	wantCode(t, err, codes.InvalidArgument, `"attempt"`)
	long := fmt.Sprintf("%065d", 0)
	_, err = s.action(t.Context(), "precommit", fmt.Sprintf(`{"writer":"q","epoch":1,"attempt":%q}`, long))
	wantCode(t, err, codes.InvalidArgument, `"attempt"`)
}

// TestEmptyEpochCommits: an epoch whose stream sends its schema and no
// batch (a checkpointing engine's empty micro-batch) precommits and
// commits, creating the Delta table in that schema, and committed-epoch
// answers it. Before, the commit created no table and committed-epoch
// stayed null, so the engine's next replay check could not see it.
func TestEmptyEpochCommits(t *testing.T) {
	budget, err := membudget.New(membudget.Options{Limit: 256 << 20, MaxOpenFiles: 8, AdmissionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eps, _ := deltaEndpoints(t, budget, "events")
	s := startServer(t, serverConfig{endpoints: eps})
	attempt := s.mustAction("begin", `{"writer":"q","epoch":0}`)["attempt"].(string)
	if _, err := s.putRecords(t.Context(), cmdDesc(attemptDesc("events", "q", 0, attempt)), testSchema()); err != nil {
		t.Fatal(err)
	}
	pre := s.mustAction("precommit", `{"writer":"q","epoch":0}`)
	if n := len(pre["participants"].([]any)); n != 1 {
		t.Fatalf("precommit = %v, want the endpoint as a participant", pre)
	}
	s.mustAction("commit", `{"writer":"q","epoch":0}`)
	if ce := s.mustAction("committed-epoch", `{"endpoint":"events","writer":"q"}`); ce["epoch"] != 0.0 {
		t.Fatalf("committed-epoch = %v, want 0", ce)
	}
	if got, err := writers.SchemaOf(t.Context(), eps["events"]); err != nil || got == nil || !got.Equal(testSchema()) {
		t.Fatalf("the table's schema = %v, %v; want the stream's", got, err)
	}
}

// TestPutsOnOneConnectionJoinOneAttempt: puts naming no attempt on the
// connection that began the attempt join it (the connection id of
// ConnTagger reaches every call of a connection), while a put naming no
// attempt from another connection is refused: it would drop their rows.
func TestPutsOnOneConnectionJoinOneAttempt(t *testing.T) {
	s := startServer(t, serverConfig{})
	begun := s.mustAction("begin", `{"writer":"q","epoch":1}`)["attempt"]
	for _, n := range []int{3, 2} {
		if _, err := s.put(t.Context(), txnDesc("events", "q", 1), n); err != nil {
			t.Fatal(err)
		}
	}
	st := s.mustAction("status", `{"writer":"q","epoch":1}`)
	if st["attempt"] != begun || st["participants"].([]any)[0].(map[string]any)["rows"] != 5.0 {
		t.Fatalf("status = %v, want attempt %v with 5 rows", st, begun)
	}
	other := s.reconnected()
	_, err := other.put(t.Context(), txnDesc("events", "q", 1), 4)
	wantCode(t, err, codes.FailedPrecondition, "begin the epoch again")
	if st := other.mustAction("status", `{"writer":"q","epoch":1}`); st["attempt"] != begun {
		t.Fatalf("status = %v: a put from another connection changed the attempt", st)
	}
}
