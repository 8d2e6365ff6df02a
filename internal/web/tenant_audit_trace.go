package web

import (
	"net/url"
	"strconv"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/incident"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// parseTraceJobFilter reads the timeline's trace and job filters: a tenant
// follows one request (its trace id, from a response's X-Trace-Id or a job)
// or one job's lifecycle through its own trail. Row-level security keeps
// the answer to the tenant's own events whatever the id.
func parseTraceJobFilter(fm *viewtenant.AuditFilterForm, f *audit.Filter, canon url.Values) {
	if fm.Trace != "" {
		if incident.ValidateTraceID(fm.Trace) != nil {
			fm.Errors["trace"] = "A trace id has letters, digits and . _ : - only (at most 200)."
		} else {
			f.TraceID = fm.Trace
			canon.Set("trace", fm.Trace)
		}
	}
	if fm.Job != "" {
		id, err := strconv.ParseInt(fm.Job, 10, 64)
		if err != nil || id <= 0 {
			fm.Errors["job"] = "A job id is a positive number."
		} else {
			f.JobID = &id
			canon.Set("job", fm.Job)
		}
	}
}
