package reqctx

import "context"

type fieldKey int

const (
	tenantKey fieldKey = iota
	jobKey
	workerKey
)

// WithTenant returns ctx carrying the tenant the work is for, so logs
// written under it name the tenant.
func WithTenant(ctx context.Context, tenantID int64) context.Context {
	return context.WithValue(ctx, tenantKey, tenantID)
}

// Tenant returns the tenant id carried by ctx (0 when none).
func Tenant(ctx context.Context) int64 {
	v, _ := ctx.Value(tenantKey).(int64)
	return v
}

// WithJob returns ctx carrying the job being run and the worker running it,
// so logs and the jobs a handler enqueues can be tied back to it.
func WithJob(ctx context.Context, jobID int64, workerID string) context.Context {
	ctx = context.WithValue(ctx, jobKey, jobID)
	return context.WithValue(ctx, workerKey, workerID)
}

// Job returns the id of the job being run (0 outside a job handler).
func Job(ctx context.Context) int64 {
	v, _ := ctx.Value(jobKey).(int64)
	return v
}

// Worker returns the id of the worker running the current job ("" outside one).
func Worker(ctx context.Context) string {
	v, _ := ctx.Value(workerKey).(string)
	return v
}
