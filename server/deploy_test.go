package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/quiver-ingest/quiver/internal/devbroker"
)

// The operator files of deploy/ (docs/operations.md).
const (
	alertsFile    = "../deploy/prometheus/alerts.yaml"
	dashboardFile = "../deploy/grafana/quiver.json"
)

// TestDeployFiles: the alert rules are valid Prometheus rules (parsed and
// validated by Prometheus' own rulefmt), every PromQL expression of the
// Grafana dashboard parses, and every metric either names is exported on
// /metrics by a server after a put to every sink kind.
func TestDeployFiles(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	used := map[string][]string{} // metric → where
	note := func(where, expr string) {
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			return
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				used[vs.Name] = append(used[vs.Name], where)
			}
			return nil
		})
	}

	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			note("alert "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"QuiverEndpointDegraded", "QuiverCommitsFailing", "QuiverTransactionStuck", "QuiverBufferSaturated", "QuiverKafkaDLQ", "QuiverDataDirFilling"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yaml lacks %s", want)
		}
	}

	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	// Grafana's variables, as Grafana substitutes them.
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$endpoint", ".*")
	exprs := 0
	for _, pn := range dash.Panels {
		for _, tg := range pn.Targets {
			exprs++
			note("panel "+pn.Title, grafana.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+), *\w+\)$`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			used[m[1]] = append(used[m[1]], "variable "+v.Name)
		}
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d expressions; expected its panels", exprs)
	}

	exported := exportedMetrics(t)
	for name, where := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !exported[name] && !exported[base] {
			t.Errorf("metric %s (used by %s) is not exported by the server", name, strings.Join(slices.Compact(where), ", "))
		}
	}
}

// exportedMetrics scrapes /metrics of a server with an endpoint of every
// sink kind after a put to each, returning the metric family names.
func exportedMetrics(t *testing.T) map[string]bool {
	kafka, err := devbroker.Start(devbroker.Options{Listen: "127.0.0.1:0", Partitions: 1, Topics: []string{"clicks", "clicks-dlq"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	s := startServer(t, fmt.Sprintf(`endpoints:
  - {name: devnull, sink: discard}
  - {name: events, sink: delta, delta: {table_uri: "file://tables/events"}}
  - {name: clicks, sink: kafka, kafka: {brokers: [%q], topic: clicks, format: json, dlq_topic: clicks-dlq}}
  - {name: items, sink: lance, lance: {dataset_uri: "file://tables/items.lance"}}
`, kafka.Addrs()[0]))
	c := dialClient(t, s)
	for _, ep := range []string{"devnull", "events", "clicks", "items"} {
		if _, err := c.Put(t.Context(), ep, idReader(t, 10)); err != nil {
			t.Fatalf("put to %s: %v", ep, err)
		}
	}
	code, body := httpGet(t, "http://"+s.HTTPAddr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	names := map[string]bool{}
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names[strings.Fields(rest)[0]] = true
		}
	}
	return names
}
