package txn

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of quiver_transactions_total.
const (
	resultCommitted = "committed"
	resultAborted   = "aborted"
	resultExpired   = "expired"
	resultReplayed  = "replayed"
)

// metrics are the coordinator's collectors, registered by Open and
// unregistered by Close.
type metrics struct {
	reg   prometheus.Registerer
	total *prometheus.CounterVec
	open  prometheus.GaugeFunc
	stuck prometheus.GaugeFunc
	owing prometheus.GaugeFunc
	live  liveByState
	// replayMismatches counts replays that sent other rows than their
	// epoch's commit published (checkReplayLocked).
	replayMismatches prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, c *Coordinator) (*metrics, error) {
	m := &metrics{
		reg: reg,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_transactions_total",
			Help: "Transactions finished, by result (committed, aborted, expired, replayed).",
		}, []string{"result"}),
		open: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_transactions_open",
			Help: "Transactions open or precommitted.",
		}, func() float64 { return float64(c.OpenTransactions()) }),
		stuck: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_transactions_oldest_precommitted_seconds",
			Help: "How long the oldest precommitted transaction has waited for its commit or rollback (0: none waits).",
		}, func() float64 { return c.oldestPrecommitted().Seconds() }),
		owing: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_transactions_owing_replay",
			Help: "Epochs undone after every endpoint refused their commit, whose replay is neither committed nor given up: later epochs of their writers wait.",
		}, func() float64 { return float64(c.owingReplays()) }),
		live: liveByState{c: c, desc: prometheus.NewDesc("quiver_transactions_live",
			"Transactions open or precommitted, by state.", []string{"state"}, nil)},
		replayMismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_transactions_replay_mismatches_total",
			Help: "Replays of a committed epoch that sent other row counts than its commit published (two pipelines sharing a writer name?).",
		}),
	}
	for _, r := range []string{resultCommitted, resultAborted, resultExpired, resultReplayed} {
		m.total.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for i, col := range m.collectors() {
		if err := reg.Register(col); err != nil {
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) result(r string) { m.total.WithLabelValues(r).Inc() }

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.total, m.open, m.stuck, m.owing, m.live, m.replayMismatches}
}

func (m *metrics) unregister() {
	if m.reg != nil {
		for _, col := range m.collectors() {
			m.reg.Unregister(col)
		}
	}
}

// liveByState is quiver_transactions_live{state}, counted at scrape time.
type liveByState struct {
	c    *Coordinator
	desc *prometheus.Desc
}

func (l liveByState) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l liveByState) Collect(ch chan<- prometheus.Metric) {
	open, pre := l.c.liveCounts()
	ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, float64(open), string(StateOpen))
	ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, float64(pre), string(StatePrecommitted))
}
