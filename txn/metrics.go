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
	if err := reg.Register(m.open); err != nil {
		reg.Unregister(m.total)
		return nil, err
	}
	return m, nil
}

func (m *metrics) result(r string) { m.total.WithLabelValues(r).Inc() }

func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.total)
		m.reg.Unregister(m.open)
	}
}
