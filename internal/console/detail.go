package console

import (
	"context"
	"sort"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/tenant"
)

// eventsPerSource bounds each of the two audit searches of a job's page.
const eventsPerSource = 100

// JobView is one job's page: the job, the audit events of the job and of
// its trace (other jobs, the request that enqueued it), newest first
// without duplicates, and the tenants for labels.
type JobView struct {
	Job     *Job
	Events  []audit.Recorded
	Tenants tenant.Names
}

// Job returns job id with its audit events (system pool), or
// job.ErrNotFound.
func (s *Service) Job(ctx context.Context, id int64) (JobView, error) {
	j, err := newStore(s.system).get(ctx, id)
	if err != nil {
		return JobView{}, err
	}
	v := JobView{Job: j}
	if v.Tenants, err = s.tenants.Names(ctx); err != nil {
		return JobView{}, err
	}
	// From the job's tenant only: a trace id arrives from clients
	// (traceparent), so another tenant can reuse it.
	byJob, err := s.audit.Search(ctx, audit.SearchQuery{JobID: &id, TenantID: &j.TenantID}, 0, eventsPerSource)
	if err != nil {
		return JobView{}, err
	}
	v.Events = byJob.Rows
	if j.TraceID == "" {
		return v, nil
	}
	byTrace, err := s.audit.Search(ctx, audit.SearchQuery{TraceID: j.TraceID, TenantID: &j.TenantID}, 0, eventsPerSource)
	if err != nil {
		return JobView{}, err
	}
	seen := make(map[int64]bool, len(v.Events))
	for _, e := range v.Events {
		seen[e.ID] = true
	}
	for _, e := range byTrace.Rows {
		if !seen[e.ID] {
			v.Events = append(v.Events, e)
		}
	}
	sort.SliceStable(v.Events, func(a, b int) bool { return v.Events[a].ID > v.Events[b].ID })
	return v, nil
}
