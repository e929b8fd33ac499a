package kafka_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers/kafka"
)

// TestKcatReadsCommitted reads the sink's records back with kcat
// (librdkafka), read_committed, when kcat is installed.
func TestKcatReadsCommitted(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install -y kcat); skipping the librdkafka read-back")
	}
	mem := checkedMem(t)
	c := startCluster(t)
	topic := uniqueTopic("kcat")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn = "user"
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
	}), t.TempDir(), mem)
	if err := commitAuto(t, w, record(t, mem, rowsSchema, `[{"user":"a","n":1},{"user":"b","n":2}]`)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kcat, "-C", "-b", c.Addrs()[0], "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%k=%s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	want := map[string]bool{`a={"user":"a","n":1}`: true, `b={"user":"b","n":2}`: true}
	if len(lines) != len(want) {
		t.Fatalf("kcat read %q, want %d records", lines, len(want))
	}
	for _, l := range lines {
		if !want[l] {
			t.Fatalf("kcat read %q, want %v", l, want)
		}
	}
}
