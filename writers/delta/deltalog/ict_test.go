package deltalog

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestInCommitTimestampMonotonic: with delta.enableInCommitTimestamps,
// commitInfo is the commit's first line and its inCommitTimestamp exceeds
// the previous commit's even when the clock is behind it (a winner of a
// lost race included), and the enablement properties survive.
func TestInCommitTimestampMonotonic(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		ctx := t.Context()
		s0 := create(t, store, nil)
		p := Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants", "inCommitTimestamp"}}
		m := s0.Metadata
		m.Configuration = map[string]string{"delta.enableInCommitTimestamps": "true",
			"delta.inCommitTimestampEnablementVersion": "1", "delta.inCommitTimestampEnablementTimestamp": "1"}
		if _, err := Commit(ctx, store, s0, []Action{{Protocol: &p}, {MetaData: &m}}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		// Another writer whose clock is an hour ahead commits version 2.
		ahead := time.Now().Add(time.Hour).UnixMilli()
		ahead2 := ahead
		other, err := EncodeCommit([]Action{{CommitInfo: &CommitInfo{Timestamp: ahead, InCommitTimestamp: &ahead2, Operation: "WRITE"}}, addAction("other", "d")})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.PutIfAbsent(ctx, CommitKey(2), other); err != nil {
			t.Fatal(err)
		}
		s1, err := LoadVersion(ctx, store, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Planned at version 1: the commit loses version 2, rebases and
		// must still follow the winner's timestamp.
		for i, want := range []int64{ahead + 1, ahead + 2} {
			read := s1
			if i > 0 {
				if read, err = Load(ctx, store); err != nil {
					t.Fatal(err)
				}
			}
			v, err := Commit(ctx, store, read, []Action{addAction("f"+string(rune('a'+i)), "d")}, CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			data, err := store.Get(ctx, CommitKey(v))
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(data, []byte("\n"))
			var a Action
			if err := json.Unmarshal(first, &a); err != nil || a.CommitInfo == nil || a.CommitInfo.InCommitTimestamp == nil {
				t.Fatalf("version %d: first line %s is not a commitInfo with inCommitTimestamp", v, first)
			}
			if got := *a.CommitInfo.InCommitTimestamp; got != want || a.CommitInfo.Timestamp != want {
				t.Fatalf("version %d: inCommitTimestamp %d, timestamp %d, want %d", v, got, a.CommitInfo.Timestamp, want)
			}
		}
		s, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.Metadata.Configuration; c["delta.inCommitTimestampEnablementVersion"] != "1" || c["delta.inCommitTimestampEnablementTimestamp"] != "1" {
			t.Fatalf("enablement properties lost: %v", c)
		}
	})
}
