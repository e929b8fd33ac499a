package kafka

import (
	"time"

	"github.com/quiver-ingest/quiver/bench"
)

// span is one measurement: its wall time, and the CPU time this process
// (the client measured; for Quiver also the server) and the broker used
// in it, each -1 when unknown (no /proc; kfake, whose CPU is this
// process's).
type span struct {
	wall, cpu, brokerCPU time.Duration
}

// meter starts and ends spans.
type meter struct {
	brokerPid int // 0: the broker is in this process (kfake)
}

// mark is the clocks at the start of a span.
type mark struct {
	at          time.Time
	cpu, broker time.Duration
}

func (m meter) start() mark {
	return mark{at: time.Now(), cpu: m.cpuOf(0), broker: m.brokerCPU()}
}

// since ends the span begun at a.
func (m meter) since(a mark) span {
	s := span{wall: time.Since(a.at), cpu: -1, brokerCPU: -1}
	if now := m.cpuOf(0); now >= 0 && a.cpu >= 0 {
		s.cpu = now - a.cpu
	}
	if now := m.brokerCPU(); now >= 0 && a.broker >= 0 {
		s.brokerCPU = now - a.broker
	}
	return s
}

func (m meter) brokerCPU() time.Duration {
	if m.brokerPid == 0 {
		return -1
	}
	return m.cpuOf(m.brokerPid)
}

func (meter) cpuOf(pid int) time.Duration {
	d, err := bench.CPUOf(pid)
	if err != nil {
		return -1
	}
	return d
}
