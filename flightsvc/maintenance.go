package flightsvc

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// Maintenance runs one endpoint's table maintenance (internal/maintain's
// Runner): the optimize and vacuum actions call it.
type Maintenance interface {
	// Optimize compacts the table; target nil means the endpoint's
	// maintenance.target_file_bytes.
	Optimize(ctx context.Context, target *int64) (writers.OptimizeResult, error)
	// Vacuum deletes unreferenced files; retention nil means the
	// endpoint's maintenance.vacuum_retention.
	Vacuum(ctx context.Context, retention *time.Duration, dryRun bool) (writers.VacuumResult, error)
	// Ops are the operations the endpoint supports; Optimize and Vacuum
	// refuse the others (InvalidArgument).
	Ops() writers.MaintenanceOps
}

// maxRetentionHours bounds vacuum's retention_hours (ten years): more is
// a typo, and would overflow a duration.
const maxRetentionHours = 10 * 366 * 24

type (
	optimizeResult struct {
		Endpoint string `json:"endpoint"`
		writers.OptimizeResult
	}
	vacuumResult struct {
		Endpoint string `json:"endpoint"`
		writers.VacuumResult
	}
)

// maintenanceOf returns the maintenance of the endpoint called name, if
// the caller may use it and its sink has table maintenance.
func (s *Service) maintenanceOf(ctx context.Context, what, name string) (Maintenance, error) {
	e, err := s.endpoint(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if e.Maintenance == nil {
		return nil, writers.Errorf(writers.ErrInvalid, "%s: endpoint %q (sink %s) has no table maintenance", what, shown(name), e.Sink)
	}
	return e.Maintenance, nil
}

func (s *Service) optimize(ctx context.Context, body []byte) (any, error) {
	const what = "action optimize"
	var b struct {
		Endpoint        *string `json:"endpoint"`
		TargetFileBytes *int64  `json:"target_file_bytes"`
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	name, err := requireString(what, "endpoint", b.Endpoint)
	if err != nil {
		return nil, err
	}
	if b.TargetFileBytes != nil && (*b.TargetFileBytes <= 0 || *b.TargetFileBytes > maxTargetFileBytes) {
		return nil, writers.Errorf(writers.ErrInvalid, `%s: field "target_file_bytes" must be from 1 to %d (16 GiB), got %d`, what, maxTargetFileBytes, *b.TargetFileBytes)
	}
	m, err := s.maintenanceOf(ctx, what, name)
	if err != nil {
		return nil, err
	}
	res, err := m.Optimize(ctx, b.TargetFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return optimizeResult{Endpoint: name, OptimizeResult: res}, nil
}

func (s *Service) vacuum(ctx context.Context, body []byte) (any, error) {
	const what = "action vacuum"
	var b struct {
		Endpoint       *string  `json:"endpoint"`
		RetentionHours *float64 `json:"retention_hours"`
		DryRun         *bool    `json:"dry_run"`
	}
	if err := decodeStrict(what, body, &b); err != nil {
		return nil, err
	}
	name, err := requireString(what, "endpoint", b.Endpoint)
	if err != nil {
		return nil, err
	}
	var retention *time.Duration
	if h := b.RetentionHours; h != nil {
		if math.IsNaN(*h) || *h < 0 || *h > maxRetentionHours {
			return nil, writers.Errorf(writers.ErrInvalid, `%s: field "retention_hours" must be from 0 to %d, got %g`, what, maxRetentionHours, *h)
		}
		d := time.Duration(*h * float64(time.Hour))
		retention = &d
	}
	m, err := s.maintenanceOf(ctx, what, name)
	if err != nil {
		return nil, err
	}
	res, err := m.Vacuum(ctx, retention, b.DryRun != nil && *b.DryRun)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return vacuumResult{Endpoint: name, VacuumResult: res}, nil
}

// maxTargetFileBytes bounds the optimize action's target_file_bytes: a
// caller asking for more would have every optimize rewrite whole
// partitions as "small".
const maxTargetFileBytes = 16 << 30
