// Package maintain runs table maintenance (writers.Maintainer: optimize,
// vacuum) for the server: from the optimize and vacuum actions and in the
// background (maintenance.optimize_every), one run at a time per server so
// that maintenance stays off the ingest path's CPU and memory, with metrics
// and a log line per run.
//
// It resolves what a request leaves open from the endpoint's maintenance
// section (target size, retention) and refuses a retention below
// vacuum_min_retention before any sink is asked.
package maintain

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/writers"
)

// Limiter bounds how many maintenance runs the server makes at once: one.
// Runs wait for it; share one Limiter between every Runner of a server.
type Limiter chan struct{}

// NewLimiter returns a limiter admitting one run at a time.
func NewLimiter() Limiter { return make(Limiter, 1) }

func (l Limiter) acquire(ctx context.Context) (func(), error) {
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, writers.Errorf(writers.ErrUnavailable, "waiting for another maintenance run to finish: %w", ctx.Err())
	}
}

// Options build a Runner.
type Options struct {
	// Endpoint names the endpoint in logs and errors.
	Endpoint string
	// Writer is the endpoint's writer; its Maintainer is looked up at every
	// run (writers.Find), as the sink may be closed and reopened.
	Writer writers.Writer
	// Ops are the operations the endpoint's sink supports (its
	// Sink.Maintains): the others are refused, and skipped in the
	// background.
	Ops writers.MaintenanceOps
	// Config is the endpoint's maintenance section.
	Config writers.Maintenance
	// UntrackedMinAge is how old a file no version references must be
	// before vacuum deletes it: the longest a transaction may hold
	// precommitted files (txn.MaxTTL), so that no in-flight commit loses
	// one.
	UntrackedMinAge time.Duration
	// Limiter is the server's; nil means one of the Runner's own.
	Limiter Limiter
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the metrics, already labelled with the endpoint;
	// nil registers none.
	Registerer prometheus.Registerer
}

// Runner runs one endpoint's maintenance. Its methods are safe for
// concurrent use.
type Runner struct {
	opts    Options
	log     *slog.Logger
	m       *metrics
	commits atomic.Int64 // since the last background run
	kick    chan struct{}
}

// New builds a Runner and registers its metrics.
func New(opts Options) (*Runner, error) {
	if opts.Limiter == nil {
		opts.Limiter = NewLimiter()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("maintenance of endpoint %q: %w", opts.Endpoint, err)
	}
	return &Runner{opts: opts, log: opts.Logger, m: m, kick: make(chan struct{}, 1)}, nil
}

// maintainer is the endpoint's sink Maintainer, or why there is none.
func (r *Runner) maintainer(ctx context.Context) (writers.Maintainer, error) {
	if m, ok := writers.Find[writers.Maintainer](r.opts.Writer); ok {
		return m, nil
	}
	// Not open: the endpoint answers why.
	if err := r.opts.Writer.Check(ctx); err != nil {
		return nil, err
	}
	return nil, writers.Errorf(writers.ErrInvalid, "endpoint %q has no table maintenance", r.opts.Endpoint)
}

// Ops are the maintenance operations the endpoint supports.
func (r *Runner) Ops() writers.MaintenanceOps { return r.opts.Ops }

// unsupported refuses op when the endpoint's sink does not support it,
// before any run is made or counted.
func (r *Runner) unsupported(op string, ok bool) error {
	if ok {
		return nil
	}
	return writers.Errorf(writers.ErrInvalid, "endpoint %q does not support %s (it supports %s)", r.opts.Endpoint, op, strings.Join(r.opts.Ops.Names(), ", "))
}

// Optimize compacts the endpoint's table; target nil means
// maintenance.target_file_bytes.
func (r *Runner) Optimize(ctx context.Context, target *int64) (writers.OptimizeResult, error) {
	if err := r.unsupported("optimize", r.opts.Ops.Optimize); err != nil {
		return writers.OptimizeResult{}, err
	}
	req := writers.OptimizeRequest{TargetFileBytes: r.opts.Config.TargetFileBytes}
	if target != nil {
		if *target <= 0 {
			return writers.OptimizeResult{}, writers.Errorf(writers.ErrInvalid, "target_file_bytes must be positive, got %d", *target)
		}
		req.TargetFileBytes = *target
	}
	var res writers.OptimizeResult
	err := r.run(ctx, "optimize", func(ctx context.Context, m writers.Maintainer) (err error) {
		res, err = m.Optimize(ctx, req)
		return err
	})
	if err != nil {
		return writers.OptimizeResult{}, err
	}
	r.m.files.WithLabelValues("optimize", "removed").Add(float64(res.FilesRemoved))
	r.m.files.WithLabelValues("optimize", "added").Add(float64(res.FilesAdded))
	r.m.bytes.WithLabelValues("optimize", "removed").Add(float64(res.BytesRemoved))
	r.m.bytes.WithLabelValues("optimize", "added").Add(float64(res.BytesAdded))
	r.log.Info("optimize done", "version", res.Version, "files_removed", res.FilesRemoved, "files_added", res.FilesAdded,
		"bytes_removed", res.BytesRemoved, "bytes_added", res.BytesAdded, "rows", res.Rows)
	return res, nil
}

// Vacuum deletes the endpoint's unreferenced files; retention nil means
// maintenance.vacuum_retention, and one below vacuum_min_retention is
// refused.
func (r *Runner) Vacuum(ctx context.Context, retention *time.Duration, dryRun bool) (writers.VacuumResult, error) {
	if err := r.unsupported("vacuum", r.opts.Ops.Vacuum); err != nil {
		return writers.VacuumResult{}, err
	}
	keep, err := r.opts.Config.VacuumRetentionFor(retention)
	if err != nil {
		return writers.VacuumResult{}, err
	}
	req := writers.VacuumRequest{Retention: keep, UntrackedMinAge: max(keep, r.opts.UntrackedMinAge), DryRun: dryRun}
	var res writers.VacuumResult
	err = r.run(ctx, "vacuum", func(ctx context.Context, m writers.Maintainer) (err error) {
		res, err = m.Vacuum(ctx, req)
		return err
	})
	if err != nil {
		return writers.VacuumResult{}, err
	}
	if !dryRun {
		r.m.files.WithLabelValues("vacuum", "deleted").Add(float64(res.FilesDeleted))
		r.m.files.WithLabelValues("vacuum", "log_deleted").Add(float64(res.LogFilesDeleted))
		r.m.bytes.WithLabelValues("vacuum", "deleted").Add(float64(res.BytesDeleted))
	}
	r.log.Info("vacuum done", "dry_run", dryRun, "retention", keep, "files_deleted", res.FilesDeleted,
		"bytes_deleted", res.BytesDeleted, "log_files_deleted", res.LogFilesDeleted)
	return res, nil
}

// run makes one run of op under the server's limiter, timed and counted.
func (r *Runner) run(ctx context.Context, op string, f func(context.Context, writers.Maintainer) error) error {
	release, err := r.opts.Limiter.acquire(ctx)
	if err != nil {
		r.m.runs.WithLabelValues(op, "failed").Inc()
		return err
	}
	defer release()
	start := time.Now()
	err = func() (err error) {
		defer writers.Recover(&err) // the background runs have no gRPC recovery
		m, err := r.maintainer(ctx)
		if err != nil {
			return err
		}
		return f(ctx, m)
	}()
	r.m.seconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.runs.WithLabelValues(op, "failed").Inc()
		r.log.Warn(op+" failed", "err", err, "took", time.Since(start))
		return fmt.Errorf("%s endpoint %q: %w", op, r.opts.Endpoint, err)
	}
	r.m.runs.WithLabelValues(op, "ok").Inc()
	return nil
}

// Committed counts a sink commit toward optimize_every's commit count.
func (r *Runner) Committed() {
	n := r.opts.Config.OptimizeEvery.Commits
	if n > 0 && r.commits.Add(1) >= int64(n) {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Run runs background maintenance until ctx ends: optimize then vacuum
// (with vacuum_retention) after every optimize_every commits or interval,
// each only if the sink supports it (Options.Ops). It returns at once
// when optimize_every is off. A failed run is logged and counted (a
// failed optimize does not stop the vacuum); the next one comes at the
// next trigger.
func (r *Runner) Run(ctx context.Context) {
	every := r.opts.Config.OptimizeEvery
	if every.Off() {
		return
	}
	var tick <-chan time.Time
	if every.Interval > 0 {
		t := time.NewTicker(every.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-r.kick:
		}
		r.commits.Store(0)
		r.log.Info("background maintenance", "trigger", every.String())
		// An operation the sink does not support is refused before run:
		// neither logged nor counted.
		r.Optimize(ctx, nil)      //nolint:errcheck // logged and counted by run
		r.Vacuum(ctx, nil, false) //nolint:errcheck // logged and counted by run
	}
}
