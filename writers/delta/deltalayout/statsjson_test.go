package deltalayout

import (
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

func TestBuildParseStats(t *testing.T) {
	long := strings.Repeat("z", 40)
	ts := time.Date(2021, 11, 18, 2, 30, 0, 123456789, time.UTC)
	got, err := BuildStats(3, []ColumnStat{
		{Path: []string{"id"}, Min: int64(-1), Max: int64(9), NullCount: 0},
		{Path: []string{"s"}, Min: long, Max: long, NullCount: 1},
		{Path: []string{"n", "ts"}, Min: ts, Max: TimestampNTZ(ts), NullCount: 2},
		{Path: []string{"d"}, Min: Decimal("-12.30"), Max: Date(ts), NullCount: -1},
		{Path: []string{"b"}, Min: true, Max: []byte("x"), NullCount: 0},
		{Path: []string{"f"}, Min: 0.5, Max: float32(1.5), NullCount: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":3,"minValues":{"d":-12.30,"f":0.5,"id":-1,"n":{"ts":"2021-11-18T02:30:00.123Z"},"s":"` + strings.Repeat("z", 32) + `"},` +
		`"maxValues":{"d":"2021-11-18","f":1.5,"id":9,"n":{"ts":"2021-11-18T02:30:00.123"},"s":"` + strings.Repeat("z", 31) + `{"},` +
		`"nullCount":{"b":0,"f":0,"id":0,"n":{"ts":2},"s":1}}`
	if got != want {
		t.Fatalf("stats\n got %s\nwant %s", got, want)
	}
	st, err := deltalog.ParseStats(got)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := st.Min("d"); !ok || v.(interface{ String() string }).String() != "-12.30" {
		t.Errorf("min d = %v (decimals must stay exact)", v)
	}
	if v, ok := st.Max("n", "ts"); !ok || v != "2021-11-18T02:30:00.123" {
		t.Errorf("max n.ts = %v", v)
	}
	if n, ok := st.Nulls("n", "ts"); !ok || n != 2 || st.NumRecords != 3 {
		t.Errorf("nullCount n.ts = %d %v, numRecords %d", n, ok, st.NumRecords)
	}
	if _, err := BuildStats(1, []ColumnStat{{Path: []string{"x"}, Min: struct{}{}}}); err == nil {
		t.Error("unsupported stat type accepted")
	}
}
