package web

import (
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/views/admin"
	"github.com/jejakhq/jejak/views/components"
)

// This file maps the console's values into the staff views' flat rows.

// adminTenants returns every tenant for the filters and indexed for labels.
// adminTenants names every tenant for labels, and lists the customer
// tenants (not the system one) for pickers.
func adminTenants(names tenant.Names) (admin.Tenants, []admin.Tenant) {
	conv := func(ns tenant.Names) []admin.Tenant {
		out := make([]admin.Tenant, len(ns))
		for i, t := range ns {
			out[i] = admin.Tenant{ID: t.ID, Slug: t.Slug, Name: t.Name}
		}
		return out
	}
	return admin.TenantMap(conv(names)), conv(names.Listed())
}

func adminAttempts(errs []job.AttemptError) []admin.Attempt {
	out := make([]admin.Attempt, len(errs))
	for i, a := range errs {
		out[i] = admin.Attempt{Attempt: a.Attempt, At: a.At, Worker: a.Worker, Class: string(a.Class), Error: a.Error}
	}
	return out
}

func adminRow(r console.Row) admin.JobRow {
	return admin.JobRow{
		ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: string(r.State),
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		LastError: r.LastError, Class: string(r.Class), Flagged: r.Flagged, TraceID: r.TraceID,
		Errors: adminAttempts(r.Errors),
	}
}

func adminRows(rows []console.Row) []admin.JobRow {
	out := make([]admin.JobRow, len(rows))
	for i, r := range rows {
		out[i] = adminRow(r)
	}
	return out
}

func adminDetail(j *console.Job) admin.JobDetail {
	return admin.JobDetail{
		JobRow: admin.JobRow{
			ID: j.ID, TenantID: j.TenantID, Kind: j.Kind, Queue: j.Queue, State: string(j.State),
			Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
			LastError: j.LastError, Class: string(j.Class), Flagged: j.Flagged, TraceID: j.TraceID,
			Errors: adminAttempts(j.Errors),
		},
		Priority: j.Priority, AvailableAt: j.AvailableAt, RequestedAt: j.RequestedAt, AttemptedAt: j.AttemptedAt,
		LeaseExpiresAt: j.LeaseExpiresAt, ExpiresAt: j.ExpiresAt, IdempotencyKey: j.IdempotencyKey, WorkerID: j.WorkerID,
	}
}

func adminDeadGroups(gs []console.DeadGroup) []admin.DeadGroup {
	out := make([]admin.DeadGroup, len(gs))
	for i, g := range gs {
		out[i] = admin.DeadGroup{Kind: g.Kind, Class: string(g.Class), Count: g.Count, Flagged: g.Flagged, LastAt: g.LastAt, Example: g.Example}
	}
	return out
}

func adminCounts(c console.Counts) admin.Counts {
	return admin.Counts{Pending: c.Pending, Due: c.Due, Running: c.Running, Dead: c.Dead, Flagged: c.Flagged,
		Succeeded: c.Succeeded, Failed: c.Failed, Died: c.Died, FailRate: c.FailureRate()}
}

func adminGroups(gs []console.GroupCounts) []admin.GroupRow {
	out := make([]admin.GroupRow, len(gs))
	for i, g := range gs {
		out[i] = admin.GroupRow{Key: g.Key, TenantID: g.TenantID, Counts: adminCounts(g.Counts)}
	}
	return out
}

func adminSnapshot(o *console.Overview) admin.Snapshot {
	s := admin.Snapshot{
		AsOf: o.AsOf, ScheduledAsOf: o.ScheduledAsOf, Totals: adminCounts(o.Totals), HasLag: o.OldestDue != nil, Lag: o.Lag(),
		ByKind: adminGroups(o.ByKind), ByTenant: adminGroups(o.ByTenant),
		Minutes: make([]components.ChartMinute, len(o.Minutes)), Workers: make([]admin.WorkerRow, len(o.Workers)),
	}
	for i, m := range o.Minutes {
		s.Minutes[i] = components.ChartMinute{Minute: m.Minute, Succeeded: m.Succeeded, Failed: m.Failed}
	}
	for i, w := range o.Workers {
		s.Workers[i] = admin.WorkerRow{WorkerID: w.WorkerID, StartedAt: w.StartedAt, LastHeartbeat: w.LastHeartbeat,
			Running: w.Running, Capacity: w.Capacity, Queues: w.Queues, Leader: w.Leader}
	}
	return s
}
