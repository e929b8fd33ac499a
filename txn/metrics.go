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
	}
	for _, r := range []string{resultCommitted, resultAborted, resultExpired, resultReplayed} {
		m.total.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.total); err != nil {
		return nil, err
	}
	for i, col := range []prometheus.Collector{m.open, m.stuck} {
		if err := reg.Register(col); err != nil {
			reg.Unregister(m.total)
			if i > 0 {
				reg.Unregister(m.open)
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) result(r string) { m.total.WithLabelValues(r).Inc() }

func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.total)
		m.reg.Unregister(m.open)
		m.reg.Unregister(m.stuck)
	}
}
