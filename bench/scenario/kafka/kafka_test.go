package kafka

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseBrokers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "kfake", want: []string{brokerKfake}},
		{in: "kafka-sasl_ssl", want: []string{brokerSASLSSL}},
		{in: "kafka, kafka-sasl_ssl", want: []string{brokerKafka, brokerSASLSSL}},
		{in: "kafka-sasl_ssl,kafka", want: []string{brokerSASLSSL, brokerKafka}},
		{in: "redpanda", err: `--broker "redpanda": want one of`},
		{in: "kfake,kafka", err: "only the real broker's listeners combine"},
		{in: "kafka,kafka", err: "only the real broker's listeners combine"},
		{in: "kafka,kafka-sasl_ssl,kafka", err: "only the real broker's listeners combine"},
	} {
		got, err := parseBrokers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseBrokers(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseBrokers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestReportRatios checks that each target is compared with bare sarama
// over its own listener, and that the SASL_SSL / PLAINTEXT table appears
// only when both listeners ran.
func TestReportRatios(t *testing.T) {
	rows := []row{
		{format: "json", target: targetQuiver, listener: brokerKafka, streams: 1, recsPerSec: 90, cpuPerRec: 2500, brokerPerRec: 1250},
		{format: "json", target: targetSarama, listener: brokerKafka, streams: 1, recsPerSec: 100, cpuPerRec: 2000, brokerPerRec: -1},
		{format: "json", target: targetQuiver, listener: brokerSASLSSL, streams: 1, recsPerSec: 72, cpuPerRec: -1, brokerPerRec: 0},
		{format: "json", target: targetSarama, listener: brokerSASLSSL, streams: 1, recsPerSec: 80, cpuPerRec: 3000, brokerPerRec: 1000},
	}
	var out bytes.Buffer
	if err := report(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for _, want := range [][]string{
		{"json", "1", "kafka", "quiver", "90", "0.0", "0.90x", "2.50", "1.25"},
		{"json", "1", "kafka", "sarama", "100", "0.0", "1.00x", "2.00", "-"},
		{"json", "1", "kafka-sasl_ssl", "quiver", "72", "0.0", "0.90x", "-", "0.00"},
		{"json", "1", "quiver", "0.80x"}, // 72 / 90
		{"json", "1", "sarama", "0.80x"}, // 80 / 100
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return slices.Equal(strings.Fields(l), want) }) {
			t.Errorf("no line %q in the report:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := report(&out, rows[:2]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "SASL_SSL / PLAINTEXT") {
		t.Errorf("one listener, yet a SASL_SSL / PLAINTEXT table:\n%s", out.String())
	}
}

// TestSummarize checks the medians of a target's runs: records/s and the
// CPU time per record, unknown (-1) when any run could not read it.
func TestSummarize(t *testing.T) {
	spans := []span{
		{wall: 2 * time.Second, cpu: 3 * time.Second, brokerCPU: time.Second},
		{wall: time.Second, cpu: 2 * time.Second, brokerCPU: -1},
		{wall: 4 * time.Second, cpu: 4 * time.Second, brokerCPU: time.Second},
	}
	r := summarize(spans, 1e6)
	if r.recsPerSec != 5e5 {
		t.Errorf("records/s = %v, want the median 500000", r.recsPerSec)
	}
	if r.cpuPerRec != 3*time.Microsecond {
		t.Errorf("CPU per record = %v, want the median 3µs", r.cpuPerRec)
	}
	if r.brokerPerRec != -1 {
		t.Errorf("broker CPU per record = %v, want -1: one run did not know it", r.brokerPerRec)
	}
}

func TestRecordsKV(t *testing.T) {
	var r records
	want := [][2]string{{"k0", "value zero"}, {"", "keyless"}, {"k2", ""}}
	for _, kv := range want {
		r.buf = append(r.buf, kv[0]...)
		r.ends = append(r.ends, len(r.buf))
		r.buf = append(r.buf, kv[1]...)
		r.ends = append(r.ends, len(r.buf))
	}
	if r.len() != len(want) {
		t.Fatalf("len() = %d, want %d", r.len(), len(want))
	}
	for i, kv := range want {
		k, v := r.kv(i)
		if string(k) != kv[0] || string(v) != kv[1] || cap(k) != len(k) || cap(v) != len(v) {
			t.Errorf("kv(%d) = %q (cap %d), %q (cap %d); want %q, %q, capped", i, k, cap(k), v, cap(v), kv[0], kv[1])
		}
	}
}
