package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc/metadata"

	"github.com/quiver-ingest/quiver/server/config"
)

// parseTestConfig parses a config body listening on kernel-chosen ports.
func parseTestConfig(t *testing.T, yaml string) (*config.Config, error) {
	t.Helper()
	return config.Parse([]byte("listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\n"+yaml), t.TempDir(), Sinks())
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func metadataValues(ctx context.Context, key string) []string {
	md, _ := metadata.FromIncomingContext(ctx)
	return md.Get(key)
}

// metricValue returns the value of the counter or gauge name whose labels
// include labels, or -1 when there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := make(map[string]string)
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
