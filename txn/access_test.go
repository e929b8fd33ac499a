package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// only returns bg with an Access allowing just eps.
func only(eps ...string) context.Context {
	return WithAccess(bg, func(ep string) bool {
		for _, e := range eps {
			if e == ep {
				return true
			}
		}
		return false
	})
}

// A caller limited to endpoint b can neither read nor change a transaction
// on a, nor fence its writer; errors do not name a.
func TestAccessRefusesOtherEndpoints(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 3)
	fx.write("v", 1, "a", 3)
	if _, err := fx.c.Precommit(bg, "v", 1); err != nil {
		t.Fatal(err)
	}
	onB := only("b")
	calls := map[string]func() error{
		"status":    func() error { _, err := fx.c.Status(onB, "w", 1); return err },
		"precommit": func() error { _, err := fx.c.Precommit(onB, "w", 1); return err },
		"rollback":  func() error { _, err := fx.c.Rollback(onB, "w", 1); return err },
		"commit":    func() error { _, err := fx.c.Commit(onB, "v", 1, nil); return err },
		"commit handing a's descriptors": func() error {
			_, err := fx.c.Commit(onB, "x", 1, map[string][]writers.Descriptor{"a": {[]byte("d")}})
			return err
		},
		"join":            func() error { _, err := fx.c.Join(onB, "w", 1, "b"); return err },
		"begin existing":  func() error { _, err := fx.c.Begin(onB, "w", 1, 0); return err },
		"begin fencing":   func() error { _, err := fx.c.Begin(onB, "w", 3, 0); return err },
		"join fencing":    func() error { _, err := fx.c.Join(onB, "w", 3, "b"); return err },
		"begin below one": func() error { _, err := fx.c.Begin(onB, "w", 0, 0); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, writers.ErrPermissionDenied) || strings.Contains(err.Error(), `"a"`) {
				t.Fatalf("%v, want ErrPermissionDenied not naming endpoint a", err)
			}
		})
	}
	fx.mustState("w", 1, StateOpen)
	fx.mustState("v", 1, StatePrecommitted)
	if _, err := fx.c.Status(bg, "w", 3); !errors.Is(err, writers.ErrNotFound) {
		t.Fatalf("w@3: %v, want never begun", err)
	}
	if p, c, r, _ := fx.eps["a"].counts(); p != 1 || c != 0 || r != 0 {
		t.Fatalf("sink a saw %d precommits, %d commits, %d rollbacks; want 1, 0, 0", p, c, r)
	}

	// Another writer is the caller's own; a caller allowed a and b may
	// do everything.
	if _, err := fx.c.Begin(onB, "x", 1, 0); err != nil {
		t.Fatal(err)
	}
	onAB := only("a", "b")
	if _, err := fx.c.Status(onAB, "w", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Begin(onAB, "w", 3, 0); err != nil {
		t.Fatal(err)
	}
	fx.mustState("w", 1, StateAborted) // fenced
	if st, err := fx.c.Commit(onAB, "v", 1, nil); err != nil || st.State != StateCommitted {
		t.Fatalf("commit: %+v %v", st, err)
	}
}

// A decided commit's handed-over endpoints count as the transaction's.
func TestAccessCoversHandedEndpoints(t *testing.T) {
	fx := newFixture(t)
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	if _, err := fx.c.Commit(bg, "w", 1, map[string][]writers.Descriptor{"b": {[]byte("peer-b")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Status(only("a"), "w", 1); !errors.Is(err, writers.ErrPermissionDenied) {
		t.Fatalf("status: %v, want ErrPermissionDenied (b took part)", err)
	}
}

func TestWriterNameLimit(t *testing.T) {
	fx := newFixture(t)
	ok := strings.Repeat("w", MaxWriterBytes)
	if _, err := fx.c.Begin(bg, ok, 1, 0); err != nil {
		t.Fatalf("%d-byte writer: %v", MaxWriterBytes, err)
	}
	long := ok + "w"
	calls := map[string]func() error{
		"begin":     func() error { _, err := fx.c.Begin(bg, long, 1, 0); return err },
		"join":      func() error { _, err := fx.c.Join(bg, long, 1, "a"); return err },
		"precommit": func() error { _, err := fx.c.Precommit(bg, long, 1); return err },
		"commit":    func() error { _, err := fx.c.Commit(bg, long, 1, nil); return err },
		"rollback":  func() error { _, err := fx.c.Rollback(bg, long, 1); return err },
		"status":    func() error { _, err := fx.c.Status(bg, long, 1); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "257 bytes") || strings.Contains(err.Error(), long) {
			t.Errorf("%s: %v, want ErrInvalid naming the length, not the name", name, err)
		}
	}
}

func TestTTLLimit(t *testing.T) {
	fx := newFixture(t)
	if _, err := fx.c.Begin(bg, "w", 1, MaxTTL); err != nil {
		t.Fatalf("ttl = MaxTTL: %v", err)
	}
	if _, err := fx.c.Begin(bg, "w", 2, MaxTTL+time.Second); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("ttl above MaxTTL: %v, want ErrInvalid", err)
	}
	if _, err := Open(bg, Options{Dir: t.TempDir(), TTL: MaxTTL + time.Second}, fx.eps); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Open with TTL above MaxTTL: %v, want ErrInvalid", err)
	}
}

// A sink that publishes one descriptor per commit takes no handed-over
// descriptor but its own, handed back; nothing is decided when refused.
func TestHandedDescriptorsToSingleDescriptorSink(t *testing.T) {
	fx := newFixture(t)
	fx.eps["a"].set(func(f *fakeWriter) { f.single = true })
	fx.write("w", 1, "a", 1)
	fx.c.Precommit(bg, "w", 1)
	own := fx.status("w", 1).Participants[0].Descriptor

	for name, handed := range map[string]map[string][]writers.Descriptor{
		"foreign":         {"a": {[]byte("peer")}},
		"own and foreign": {"a": {own, []byte("peer")}},
	} {
		_, err := fx.c.Commit(bg, "w", 1, handed)
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `endpoint "a"`) {
			t.Fatalf("%s: %v, want ErrInvalid naming endpoint a", name, err)
		}
	}
	// Unknown here: no own descriptor at all.
	if _, err := fx.c.Commit(bg, "x", 1, map[string][]writers.Descriptor{"a": {[]byte("peer")}}); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("unknown transaction: %v, want ErrInvalid", err)
	}
	if _, n, _, _ := fx.eps["a"].counts(); n != 0 {
		t.Fatalf("sink commits %d, want 0", n)
	}
	fx.restart() // nothing was decided: still precommitted after a restart
	fx.mustState("w", 1, StatePrecommitted)

	st, err := fx.c.Commit(bg, "w", 1, map[string][]writers.Descriptor{"a": {own}})
	if err != nil || st.State != StateCommitted {
		t.Fatalf("own descriptor handed back: %+v %v", st, err)
	}
	if d := fx.eps["a"].commits[0].descs; len(d) != 1 {
		t.Fatalf("committed %q, want the own descriptor once", d)
	}
}

// A transaction belongs to the caller that began it: another caller gets
// ErrNotFound for it, as for one that does not exist, and cannot fence
// it; an admin acts on it. Ownership is journaled, so it survives a
// restart (precommitted transactions survive one).
func TestOwnersSurviveRestart(t *testing.T) {
	fx := newFixture(t)
	fx.c.Close()
	fx.c = nil
	fx.tune = func(c *Coordinator) { c.segmentBytes = 4 << 10 } // so that the owner is also restated by a compaction
	fx.open()
	alice := WithCaller(bg, Caller{Owner: "alice"})
	bob := WithCaller(bg, Caller{Owner: "bob"})
	admin := WithCaller(bg, Caller{Owner: "root", Admin: true})
	if _, err := fx.c.Begin(alice, "w", 3, 0); err != nil {
		t.Fatal(err)
	}
	s, err := fx.c.Join(alice, "w", 3, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Done(1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.c.Precommit(alice, "w", 3); err != nil {
		t.Fatal(err)
	}
	fx.fillUntilCompacted()
	fx.restart()
	refused := map[string]func() error{
		"status":   func() error { _, err := fx.c.Status(bob, "w", 3); return err },
		"rollback": func() error { _, err := fx.c.Rollback(bob, "w", 3); return err },
		"commit":   func() error { _, err := fx.c.Commit(bob, "w", 3, nil); return err },
		"join":     func() error { _, err := fx.c.Join(bob, "w", 3, "a"); return err },
		"begin":    func() error { _, err := fx.c.Begin(bob, "w", 3, 0); return err },
	}
	for name, call := range refused {
		if err := call(); !errors.Is(err, writers.ErrNotFound) {
			t.Errorf("bob's %s of alice's transaction: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := fx.c.Begin(bob, "w", 4, 0); !errors.Is(err, writers.ErrPermissionDenied) {
		t.Errorf("bob's begin fencing alice's writer: %v, want ErrPermissionDenied", err)
	}
	if st, err := fx.c.Status(alice, "w", 3); err != nil || st.Owner != "alice" || st.State != StatePrecommitted {
		t.Fatalf("alice's status after restart: %+v, %v", st, err)
	}
	if live := fx.c.Live(); len(live) != 1 || !(Caller{Owner: "alice"}).Sees(live[0]) || (Caller{Owner: "bob"}).Sees(live[0]) {
		t.Fatalf("Live %+v: alice must see it, bob not", live)
	}
	if st, err := fx.c.Rollback(admin, "w", 3); err != nil || st.State != StateAborted {
		t.Fatalf("admin rollback: %+v, %v", st, err)
	}
}

// One owner could open transactions without bound (256 with a week's ttl
// held every file slot). Options.MaxOpenPerOwner bounds each owner's
// open and precommitted ones (admins and callers without owner are
// exempt), and MaxTTLOfBegin refuses a longer ttl, naming txn.max_ttl.
func TestOwnerQuotaAndMaxTTL(t *testing.T) {
	eps := newEndpoints("a")
	c, err := Open(bg, Options{Dir: t.TempDir(), MaxOpenPerOwner: 2, MaxTTLOfBegin: time.Hour}, eps)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	alice := WithCaller(bg, Caller{Owner: "alice"})
	for _, w := range []string{"w", "v"} {
		if _, err := c.Begin(alice, w, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A begin fencing one of hers replaces it: not refused.
	if _, err := c.Begin(alice, "w", 2, 0); err != nil {
		t.Fatalf("alice's begin of a newer epoch at her quota: %v", err)
	}
	if _, err := c.Begin(alice, "x", 1, 0); !errors.Is(err, writers.ErrExhausted) || !strings.Contains(err.Error(), "limits.client_max_transactions") {
		t.Fatalf("alice's third transaction: %v, want ErrExhausted naming limits.client_max_transactions", err)
	}
	if _, err := c.Join(alice, "x", 1, "a"); !errors.Is(err, writers.ErrExhausted) {
		t.Fatalf("alice's third transaction by a put: %v, want ErrExhausted", err)
	}
	for name, ctx := range map[string]context.Context{
		"bob":    WithCaller(bg, Caller{Owner: "bob"}),
		"admin":  WithCaller(bg, Caller{Owner: "root", Admin: true}),
		"nobody": bg,
	} {
		if _, err := c.Begin(ctx, "x-"+name, 1, 0); err != nil {
			t.Errorf("%s's begin while alice is at her quota: %v", name, err)
		}
	}
	if _, err := c.Rollback(alice, "w", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(alice, "x", 1, 0); err != nil {
		t.Fatalf("alice's begin after a rollback: %v", err)
	}
	if _, err := c.Begin(bg, "long", 1, time.Hour+time.Second); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "txn.max_ttl") {
		t.Fatalf("ttl above txn.max_ttl: %v, want ErrInvalid naming it", err)
	}
}

// TestWriterNamesOfACaller: committed epochs are recorded per endpoint and
// writer, whoever committed them, so tenants sharing an endpoint get writer
// names of their own (auth.tokens[].writers, WithWriters): a caller's
// begin, put, precommit, commit, rollback, status, committed-epoch and
// stream claim of another name are PermissionDenied, before anything is
// read or written.
func TestWriterNamesOfACaller(t *testing.T) {
	fx := newFixture(t)
	etl := WithWriters(WithCaller(bg, Caller{Owner: "etl"}), func(w string) bool { return strings.HasPrefix(w, "etl-") })
	if _, err := fx.c.Begin(etl, "etl-1", 1, 0); err != nil {
		t.Fatalf("a name of the caller's: %v", err)
	}
	// Another tenant's stream writer: refused like any other name, not
	// told apart (WrongState would say it streams).
	if err := fx.c.ClaimStreamWriter(bg, "billing"); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"begin":           func() error { _, err := fx.c.Begin(etl, "billing", 9, 0); return err },
		"join":            func() error { _, err := fx.c.Join(etl, "billing", 9, "a"); return err },
		"precommit":       func() error { _, err := fx.c.Precommit(etl, "billing", 9); return err },
		"commit":          func() error { _, err := fx.c.Commit(etl, "billing", 9, nil); return err },
		"rollback":        func() error { _, err := fx.c.Rollback(etl, "billing", 9); return err },
		"status":          func() error { _, err := fx.c.Status(etl, "billing", 9); return err },
		"committed-epoch": func() error { _, _, err := fx.c.CommittedEpoch(etl, "a", "billing"); return err },
		"stream":          func() error { return fx.c.ClaimStreamWriter(etl, "billing") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, writers.ErrPermissionDenied) || !strings.Contains(err.Error(), "auth.tokens[].writers") {
			t.Errorf("%s of a name not the caller's: %v, want ErrPermissionDenied naming auth.tokens[].writers", name, err)
		}
	}
	if live := fx.c.Live(); len(live) != 1 || live[0].Writer != "etl-1" {
		t.Fatalf("live transactions %+v: the refused calls began something", live)
	}
}
