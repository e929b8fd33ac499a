package status

import (
	"sync"
	"time"

	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/server/endpoint"
)

// What a Recorder keeps.
const (
	keepCommits = 10
	keepErrors  = 20
	errorWindow = time.Hour
	// maxMessage bounds one kept error message: they may quote input.
	maxMessage = 1024
)

// Recorder is an endpoint's endpoint.Observer: it keeps the last commits
// and the errors of the last hour.
type Recorder struct {
	now     func() time.Time
	mu      sync.Mutex
	commits []CommitView // oldest first, at most keepCommits
	errors  []ErrorView  // oldest first, at most keepErrors
	// perMinute counts the errors of each of the last 60 minutes (only
	// the last keepErrors messages are kept): bounded however many fail.
	perMinute [60]minuteCount
}

type minuteCount struct {
	minute int64 // Unix minute
	n      int
}

var _ endpoint.Observer = (*Recorder)(nil)

// NewRecorder returns an empty recorder; now nil means time.Now.
func NewRecorder(now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{now: now}
}

// CommitView is one sink commit.
type CommitView struct {
	At time.Time `json:"at"`
	// Writer and Epoch are empty for an auto-commit stream.
	Writer     string  `json:"writer,omitempty"`
	Epoch      int64   `json:"epoch"`
	Version    int64   `json:"version"` // -1: the sink has no versions
	Rows       int64   `json:"rows"`
	DurationMs float64 `json:"duration_ms"`
	Replayed   bool    `json:"replayed"`
}

// ErrorView is one failed sink call.
type ErrorView struct {
	At      time.Time `json:"at"`
	Op      string    `json:"op"`
	Message string    `json:"message"`
}

// Committed implements endpoint.Observer.
func (r *Recorder) Committed(c endpoint.Commit) {
	v := CommitView{At: c.At, Version: c.Info.Version, Rows: c.Rows, DurationMs: float64(c.Took.Microseconds()) / 1000, Replayed: c.Info.Replayed}
	if !c.Key.Auto {
		v.Writer, v.Epoch = c.Key.Writer, c.Key.Epoch
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commits = keepLast(append(r.commits, v), keepCommits)
}

// Failed implements endpoint.Observer.
func (r *Recorder) Failed(op string, err error) {
	msg := redact.Text(err.Error())
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = keepLast(append(r.errors, ErrorView{At: now, Op: op, Message: msg}), keepErrors)
	m := now.Unix() / 60
	slot := &r.perMinute[m%60]
	if slot.minute != m {
		*slot = minuteCount{minute: m}
	}
	slot.n++
}

// errorsLastHourLocked counts the errors of the last 60 minutes.
func (r *Recorder) errorsLastHourLocked(now time.Time) int {
	m, n := now.Unix()/60, 0
	for _, s := range r.perMinute {
		if m-s.minute < 60 {
			n += s.n
		}
	}
	return n
}

// view returns the commits and the errors of the last hour, newest first,
// and how many errors the last hour had.
func (r *Recorder) view(now time.Time) ([]CommitView, []ErrorView, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	commits := make([]CommitView, 0, len(r.commits))
	for i := len(r.commits) - 1; i >= 0; i-- {
		commits = append(commits, r.commits[i])
	}
	errs := []ErrorView{}
	for i := len(r.errors) - 1; i >= 0 && now.Sub(r.errors[i].At) <= errorWindow; i-- {
		errs = append(errs, r.errors[i])
	}
	return commits, errs, r.errorsLastHourLocked(now)
}

// keepLast keeps the last n elements, reusing s.
func keepLast[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	return append(s[:0], s[len(s)-n:]...)
}
