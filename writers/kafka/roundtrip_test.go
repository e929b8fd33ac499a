package kafka_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/quiver-ingest/quiver/writers/kafka"
)

// javaMurmur2 are the vectors of Kafka's UtilsTest.testMurmur2: the hash
// Java's default partitioner takes toPositive() of.
var javaMurmur2 = map[string]int32{
	"21":                         -973932308,
	"foobar":                     -790332482,
	"a-little-bit-long-string":   -985981536,
	"a-little-bit-longer-string": -1486304829,
	"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
	"abc": 479470107,
}

func TestJSONRoundTripWithMurmur2Keys(t *testing.T) {
	forEachCluster(t, testJSONRoundTripWithMurmur2Keys)
}

func testJSONRoundTripWithMurmur2Keys(t *testing.T, c cluster) {
	mem := checkedMem(t)
	topic := uniqueTopic("clicks")
	w := openWriter(t, newConfig(c, topic, func(cfg *kafka.Config) {
		cfg.KeyColumn = "user"
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 7, ReplicationFactor: 1}
	}), t.TempDir(), mem)

	rows := "["
	i := 0
	for key := range javaMurmur2 {
		rows += fmt.Sprintf(`{"user":%q,"n":%d},`, key, i)
		i++
	}
	rows += `{"user":null,"n":-1}]`
	if err := commitAuto(t, w, record(t, mem, rowsSchema, rows)); err != nil {
		t.Fatal(err)
	}

	got := readCommitted(t, c.Addrs(), topic)
	if len(got) != len(javaMurmur2)+1 {
		t.Fatalf("%d records, want %d", len(got), len(javaMurmur2)+1)
	}
	for _, r := range got {
		var v struct {
			User *string `json:"user"`
			N    int64   `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
		if v.User == nil {
			if r.Key != nil {
				t.Errorf("null key column: record key %q, want no key", r.Key)
			}
			continue
		}
		if string(r.Key) != *v.User {
			t.Errorf("record key %q, value's user %q", r.Key, *v.User)
		}
		want := (javaMurmur2[*v.User] & 0x7fffffff) % 7
		if r.Partition != want {
			t.Errorf("key %q on partition %d, Java's murmur2 puts it on %d", r.Key, r.Partition, want)
		}
	}
}
