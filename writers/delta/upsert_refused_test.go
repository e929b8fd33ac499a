package delta

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// TestPrecommitAfterRefusedWrite: an upsert key whose only batch was
// refused (a column the table lacks, schema evolution off) admitted
// nothing; its Precommit returns a descriptor that publishes nothing
// (never a panic), and committing it leaves the table as it was. Plain
// and column-mapped tables.
func TestPrecommitAfterRefusedWrite(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		name := "plain"
		if mapped {
			name = "column-mapped"
		}
		t.Run(name, func(t *testing.T) {
			mem := checkedMem(t)
			var cfg *Config
			if mapped {
				cfg = mappedKV(t)
			} else {
				cfg = testConfig(fileURI(t), func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
			}
			w := openWriter(t, cfg, mem)
			seed := kvBatch(mem, true, kv{1, "a", 10})
			defer seed.Release()
			commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 1}, seed)

			ctx := context.Background()
			key := writers.TxnKey{Writer: "up", Epoch: 2}
			rec := kvBatch(mem, true, kv{1, "x", 100})
			defer rec.Release()
			bad := withNulls(mem, rec, []arrow.Field{{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}})
			defer bad.Release()
			if err := w.Write(ctx, key, bad); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("Write of an unknown column: %v, want ErrInvalid", err)
			}
			d, err := w.Precommit(ctx, key)
			if err != nil {
				t.Fatalf("Precommit: %v", err)
			}
			if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1|a|10"})
		})
	}
}
