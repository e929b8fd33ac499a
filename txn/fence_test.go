package txn

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/testpoll"
)

// TestFenceWaitsForTheFencedAttemptsRollback: a begin fences an attempt
// whose streams are still writing on endpoints a and b; the last of
// them to end rolls the endpoints back (Stream.Done → discardParts), one
// after the other. fence returns as soon as no stream is left and
// t.discard is empty, which it is as soon as that Done took the list,
// not when the rollbacks are done. While the rollback of a is slow (S3
// deleting many staged files), the new attempt begins and writes to b;
// then the old attempt's Rollback of b, for the same TxnKey (keys carry
// no attempt), discards the new attempt's staged rows: in a real sink,
// Stages.Rollback takes the new stage and deletes its files, racing its
// Write. The new attempt's rows on b are lost without an error. Now the
// begin returns only once the fenced attempt's rollbacks have ended.
func TestFenceWaitsForTheFencedAttemptsRollback(t *testing.T) {
	fx := newFixture(t, "a", "b")
	old := WithConn(bg, "old:1")
	s1, err := fx.c.Join(old, "q", 7, "a")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := fx.c.Join(old, "q", 7, "b")
	if err != nil {
		t.Fatal(err)
	}
	a, b := fx.eps["a"], fx.eps["b"]
	a.mu.Lock() // a's Rollback is slow
	locked := true
	defer func() {
		if locked {
			a.mu.Unlock()
		}
	}()
	begun := make(chan Status, 1)
	go func() {
		st, err := fx.c.Begin(WithConn(bg, "new:2"), "q", 7, 0)
		if err != nil {
			t.Error(err)
		}
		begun <- st
	}()
	// The begin has fenced (aborted) the old attempt and waits for its
	// streams; the last of them rolls a back (blocked), then b.
	testpoll.Until(t, "the begin to fence the old attempt", func() bool { return fx.status("q", 7).State == StateAborted })
	s1.Done(1, nil)
	go s2.Done(1, nil)
	t7 := fx.c.txns[txnID{"q", 7}]
	testpoll.Until(t, "the old attempt's rollback to run", func() bool {
		fx.c.mu.Lock()
		defer fx.c.mu.Unlock()
		return t7.rollingBack > 0
	})
	select {
	case st := <-begun:
		t.Fatalf("the begin returned (attempt %s) while the fenced attempt's rollback still ran", st.Attempt)
	default:
	}
	a.mu.Unlock()
	locked = false
	st := <-begun
	b.mu.Lock()
	before := len(b.rollbacks)
	b.mu.Unlock()
	// The new attempt writes to b: no rollback of the old one may follow.
	s3, err := fx.c.Join(WithAttempt(WithConn(bg, "new:2"), st.Attempt), "q", 7, "b")
	if err != nil {
		t.Fatal(err)
	}
	s3.Done(7, nil)
	b.mu.Lock()
	after := len(b.rollbacks)
	b.mu.Unlock()
	if after != before {
		t.Fatalf("endpoint b was rolled back for q@7 after the new attempt %s began: the fenced attempt's late rollback discards its rows", st.Attempt)
	}
	if rows := rowsOf(fx.status("q", 7)); rows != 7 {
		t.Fatalf("%d rows staged, want the new attempt's 7", rows)
	}
}
