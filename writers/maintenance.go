package writers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Maintainer is implemented by sinks whose tables accumulate small files
// and dead files (Delta, Lance): streaming ingestion commits often, and
// nothing else ever compacts or deletes. The server runs it from the
// optimize and vacuum actions and from background maintenance
// (maintenance.optimize_every), at most one call per endpoint at a time.
//
// Both calls commit or delete only what the table's own protocol allows
// concurrent writers to see: optimize publishes a rewrite of rows that
// already exist (no row appears, disappears or repeats for a reader), and
// vacuum deletes only files no version inside the retention references and
// no in-flight transaction may still publish.
type Maintainer interface {
	// Optimize compacts the table's files smaller than req.TargetFileBytes
	// into files of about that size and drops the rows deletions marked,
	// in one commit that changes no row. A table with nothing to compact
	// answers a zero result (Version the current one) and commits nothing.
	Optimize(ctx context.Context, req OptimizeRequest) (OptimizeResult, error)
	// Vacuum deletes the files (and old versions) no version younger than
	// req.Retention references; with req.DryRun it only counts them.
	Vacuum(ctx context.Context, req VacuumRequest) (VacuumResult, error)
}

// MaintenanceOps are the maintenance operations a sink supports (its
// Sink.Maintains). Its Maintainer answers the others with ErrInvalid
// saying why; the server neither runs them in the background nor lists
// them for the endpoint.
type MaintenanceOps struct{ Optimize, Vacuum bool }

// Any reports whether the sink supports some maintenance.
func (o MaintenanceOps) Any() bool { return o.Optimize || o.Vacuum }

// Names lists the supported operations by action name.
func (o MaintenanceOps) Names() []string {
	var out []string
	if o.Optimize {
		out = append(out, "optimize")
	}
	if o.Vacuum {
		out = append(out, "vacuum")
	}
	return out
}

// OptimizeRequest is one optimize run.
type OptimizeRequest struct {
	// TargetFileBytes is the size compacted files aim for; files at least
	// this large (and without deletions) are left alone. Always positive.
	TargetFileBytes int64
}

// OptimizeResult is what an optimize run did. Version is the table version
// it committed, or the current one when it committed nothing (NoVersion:
// no table yet).
type OptimizeResult struct {
	Version      int64 `json:"version"`
	FilesRemoved int64 `json:"files_removed"`
	FilesAdded   int64 `json:"files_added"`
	BytesRemoved int64 `json:"bytes_removed"`
	BytesAdded   int64 `json:"bytes_added"`
	// Rows is the number of rows the rewritten files hold.
	Rows int64 `json:"rows"`
}

// VacuumRequest is one vacuum run.
type VacuumRequest struct {
	// Retention keeps every file a version younger than this references,
	// and every unreferenced file younger than this. It has been checked
	// against maintenance.vacuum_min_retention already.
	Retention time.Duration
	// UntrackedMinAge is how old a file that no version ever referenced
	// (a failed or in-flight transaction's) must be before it is deleted;
	// at least Retention. It protects the precommitted files of
	// transactions still in flight, on this server or another; Lance also
	// keeps the version recording a writer's newest epoch this long, so
	// that replays of those transactions are still recognized.
	UntrackedMinAge time.Duration
	// DryRun counts what would be deleted without deleting it.
	DryRun bool
}

// VacuumResult is what a vacuum run deleted (or would, with DryRun).
type VacuumResult struct {
	FilesDeleted int64 `json:"files_deleted"`
	BytesDeleted int64 `json:"bytes_deleted"`
	// LogFilesDeleted counts log files (Delta commits and checkpoints)
	// or old versions' manifests (Lance) deleted.
	LogFilesDeleted int64 `json:"log_files_deleted"`
	DryRun          bool  `json:"dry_run"`
	// RetentionHours is the retention applied, which a table property may
	// have raised above the one asked for.
	RetentionHours float64 `json:"retention_hours"`
}

// Maintenance is an endpoint's `maintenance:` section: how the server
// keeps the table healthy. NewMaintenance holds every default.
type Maintenance struct {
	// OptimizeEvery runs optimize then vacuum in the background after
	// this many commits or this long; off by default.
	OptimizeEvery Every `yaml:"optimize_every"`
	// TargetFileBytes is optimize's target file size.
	TargetFileBytes int64 `yaml:"target_file_bytes"`
	// VacuumRetention is vacuum's retention when an action names none.
	VacuumRetention time.Duration `yaml:"vacuum_retention"`
	// VacuumMinRetention refuses a vacuum asking for less retention (as
	// Spark's retentionDurationCheck does).
	VacuumMinRetention time.Duration `yaml:"vacuum_min_retention"`
	// CheckpointInterval (Delta) writes a checkpoint every this many
	// versions; 0 follows the table's delta.checkpointInterval.
	CheckpointInterval int `yaml:"checkpoint_interval"`
	// LogRetention (Delta) is how long commit files and checkpoints are
	// kept when the table sets no delta.logRetentionDuration.
	LogRetention time.Duration `yaml:"log_retention"`
}

// Maintenance defaults (docs/configuration.md, "maintenance").
const (
	DefaultOptimizeTargetBytes = 128 << 20
	DefaultVacuumRetention     = 168 * time.Hour
	DefaultLogRetention        = 30 * 24 * time.Hour
)

// NewMaintenance returns the defaults: no background maintenance, 128 MiB
// files, 168 h retention and minimum retention, the table's checkpoint
// interval, 30 days of log.
func NewMaintenance() Maintenance {
	return Maintenance{
		TargetFileBytes:    DefaultOptimizeTargetBytes,
		VacuumRetention:    DefaultVacuumRetention,
		VacuumMinRetention: DefaultVacuumRetention,
		LogRetention:       DefaultLogRetention,
	}
}

// Validate checks every key and reports all problems, one per line, each
// starting with the key.
func (m Maintenance) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if m.TargetFileBytes <= 0 {
		bad("target_file_bytes", "%d: must be positive (default %d)", m.TargetFileBytes, DefaultOptimizeTargetBytes)
	}
	if m.VacuumMinRetention < 0 {
		bad("vacuum_min_retention", "%s: must not be negative", m.VacuumMinRetention)
	}
	if m.VacuumRetention < m.VacuumMinRetention {
		bad("vacuum_retention", "%s is below vacuum_min_retention (%s): raise it, or lower vacuum_min_retention knowing that readers of older versions lose them", m.VacuumRetention, m.VacuumMinRetention)
	}
	if m.CheckpointInterval < 0 {
		bad("checkpoint_interval", "%d: must be 0 (the table's delta.checkpointInterval) or positive", m.CheckpointInterval)
	}
	if m.LogRetention <= 0 {
		bad("log_retention", "%s: must be positive (default %s)", m.LogRetention, DefaultLogRetention)
	}
	return errors.Join(errs...)
}

// VacuumRetentionFor resolves a vacuum's retention: asked (nil means
// vacuum_retention), refused with ErrInvalid below vacuum_min_retention.
func (m Maintenance) VacuumRetentionFor(asked *time.Duration) (time.Duration, error) {
	r := m.VacuumRetention
	if asked != nil {
		r = *asked
	}
	if r < m.VacuumMinRetention {
		return 0, Errorf(ErrInvalid, "a retention of %s is below maintenance.vacuum_min_retention (%s): readers of older versions, and transactions still in flight, could lose their files; ask for more, or have the operator lower vacuum_min_retention", r, m.VacuumMinRetention)
	}
	return r, nil
}

// Every is optimize_every: a number of commits ("100") or a duration
// ("15m"); the zero value (also "0" or "off") is off.
type Every struct {
	Commits  int
	Interval time.Duration
}

// Off reports whether background maintenance is off.
func (e Every) Off() bool { return e.Commits == 0 && e.Interval == 0 }

// UnmarshalText parses a commit count or a Go duration.
func (e *Every) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "" || s == "off" || s == "0" {
		*e = Every{}
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return fmt.Errorf("%d: a number of commits must be positive", n)
		}
		*e = Every{Commits: n}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is neither a number of commits (100) nor a positive duration (15m)", s)
	}
	*e = Every{Interval: d}
	return nil
}

func (e Every) String() string {
	switch {
	case e.Commits > 0:
		return strconv.Itoa(e.Commits) + " commits"
	case e.Interval > 0:
		return e.Interval.String()
	}
	return "off"
}

// MaintenanceOf is env's maintenance section, or the defaults when env
// carries none (a sink built outside the server, in tests).
func MaintenanceOf(env Env) Maintenance {
	if env.Maintenance == (Maintenance{}) {
		return NewMaintenance()
	}
	return env.Maintenance
}
