package console

import (
	"context"

	"github.com/jejakhq/jejak/internal/job"
)

// Links are a job's dependencies both ways, for its page.
type Links struct {
	WaitsFor      int64 // 0 = none
	WaitsForState job.State
	NeededBy      []job.Link
}

// Dependencies returns what job id of tenantID runs after and what waits
// for it.
func (s *Service) Dependencies(ctx context.Context, tenantID, id int64) (Links, error) {
	waits, deps, err := job.Dependencies(ctx, s.system, tenantID, id)
	if err != nil {
		return Links{}, err
	}
	l := Links{NeededBy: deps}
	if waits != nil {
		l.WaitsFor = *waits
		if j, err := newStore(s.system).get(ctx, *waits); err == nil {
			l.WaitsForState = j.State
		} else {
			l.WaitsForState = "pruned"
		}
	}
	return l, nil
}
