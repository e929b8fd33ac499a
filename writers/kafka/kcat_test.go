package kafka_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/internal/reftool"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
)

// TestKcatReadsCommitted reads the sink's records back with kcat
// (librdkafka), read_committed, when kcat is installed: the JSON values
// and keys of an auto-commit stream and of a transaction, each on the
// partition Java's murmur2 picks for its key.
func TestKcatReadsCommitted(t *testing.T) { forEachCluster(t, testKcatReadsCommitted) }

func testKcatReadsCommitted(t *testing.T, c cluster) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		reftool.Missing(t, "kcat", fmt.Errorf("%w (apt-get install -y kcat; .ci/run installs it): no librdkafka read-back", err))
	}
	mem := checkedMem(t)
	topic := uniqueTopic("kcat")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn = "user"
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 7, ReplicationFactor: 1}
	}), t.TempDir(), mem)

	want := map[string]string{} // key → value
	var auto, txn strings.Builder
	i := 0
	for key := range javaMurmur2 {
		row := fmt.Sprintf(`{"user":%q,"n":%d}`, key, i)
		want[key] = row
		b := &auto
		if i%2 == 1 {
			b = &txn
		}
		if b.Len() > 0 {
			b.WriteString(",")
		}
		b.WriteString(row)
		i++
	}
	if err := commitAuto(t, w, record(t, mem, rowsSchema, "["+auto.String()+"]")); err != nil {
		t.Fatal(err)
	}
	commitTxn(t, w, mem, writers.TxnKey{Writer: "job", Epoch: 1}, "["+txn.String()+"]")

	out, err := exec.Command(kcat, "-C", "-b", c.Addrs()[0], "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", `%p\t%k\t%s\n`).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("kcat read %d records, want %d:\n%s", len(lines), len(want), out)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("kcat line %q is not partition, key, value", l)
		}
		p, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("kcat line %q: partition: %v", l, err)
		}
		key, value := f[1], f[2]
		if want[key] != value || seen[key] {
			t.Fatalf("kcat read key %q value %s, want each key once with %s", key, value, want[key])
		}
		seen[key] = true
		if wantP := int((javaMurmur2[key] & 0x7fffffff) % 7); p != wantP {
			t.Errorf("kcat found key %q on partition %d, Java's murmur2 puts it on %d", key, p, wantP)
		}
	}
}
