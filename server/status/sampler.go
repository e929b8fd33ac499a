package status

import (
	"sync"
	"time"
)

// sampler keeps each endpoint's throughput as a ring of points, computed
// from the growth of its counters between samples.
type sampler struct {
	mu   sync.Mutex
	max  int
	last map[string]counts
	at   time.Time
	pts  map[string][]Point // oldest first, at most max
}

func newSampler(endpoints []string, max int) *sampler {
	s := &sampler{max: max, last: make(map[string]counts), pts: make(map[string][]Point)}
	for _, e := range endpoints {
		s.pts[e] = nil
	}
	return s
}

// add records one sample of the counters taken at now.
func (s *sampler) add(now time.Time, c map[string]counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dt := now.Sub(s.at).Seconds()
	first := s.at.IsZero()
	s.at = now
	for ep, pts := range s.pts {
		cur, prev := c[ep], s.last[ep]
		s.last[ep] = cur
		if first || dt <= 0 {
			continue
		}
		p := Point{At: now, RowsPerSec: rate(cur.rows, prev.rows, dt), BytesPerSec: rate(cur.bytes, prev.bytes, dt)}
		if len(pts) == s.max {
			pts = append(pts[:0], pts[1:]...)
		}
		s.pts[ep] = append(pts, p)
	}
}

// rate is the growth per second; a counter that went back (an endpoint
// rebuilt with fresh metrics) counts from zero.
func rate(cur, prev int64, dt float64) float64 {
	if cur < prev {
		prev = 0
	}
	return float64(cur-prev) / dt
}

// points returns a copy of an endpoint's points.
func (s *sampler) points(ep string) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Point{}, s.pts[ep]...)
}
