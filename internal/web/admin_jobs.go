package web

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/admin"
)

// errJobNotFound answers unknown and malformed job ids alike.
var errJobNotFound = apperr.NotFound("job not found")

var validStates = map[string]bool{"pending": true, "running": true, "succeeded": true, "dead": true, "cancelled": true}

// adminJobs lists jobs across tenants with filters and keyset pages. Bad
// filter values answer 422 with the message next to the field.
func (s *Server) adminJobs(c echo.Context) error {
	ctx := c.Request().Context()
	tenants, all, err := s.tenantNames(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	form := admin.JobsForm{
		State: q.Get("state"), Kind: strings.TrimSpace(q.Get("kind")), Tenant: q.Get("tenant"),
		Queue: strings.TrimSpace(q.Get("queue")), ID: strings.TrimSpace(q.Get("id")),
		Trace: strings.TrimSpace(q.Get("trace")), Key: q.Get("key"), Payload: strings.TrimSpace(q.Get("payload")),
		Errors: map[string]string{},
	}
	f := job.AdminFilter{State: job.State(form.State), Kind: form.Kind, Queue: form.Queue, TraceID: form.Trace, IdempotencyKey: form.Key}
	if form.State != "" && !validStates[form.State] {
		form.Errors["state"] = "Unknown state."
	}
	if form.Tenant != "" {
		id, ok := tenantBySlug(all, form.Tenant)
		if !ok {
			form.Errors["tenant"] = "Unknown tenant."
		}
		f.TenantID = id
	}
	if form.ID != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(form.ID, "#"), 10, 64)
		if err != nil || id <= 0 {
			form.Errors["id"] = "A job id is a positive number."
		}
		f.ID = id
	}
	if len(form.Kind) > 100 || len(form.Queue) > 100 || len(form.Key) > 500 {
		form.Errors["state"] = "Kind and queue are at most 100 characters, the key 500."
	}
	if len(form.Trace) > 200 {
		form.Errors["trace"] = "A trace id is at most 200 characters."
	}
	if form.Payload != "" {
		obj, err := parsePayloadFilter(form.Payload)
		if err != nil {
			form.Errors["payload"] = err.Error()
		}
		f.PayloadContains = obj
	}
	before, err := parseCursor(q.Get("before"))
	if err != nil {
		return err
	}
	vm := admin.JobsVM{Form: form, AllTenants: all, Tenants: tenants, FirstPage: before == 0}
	status := http.StatusOK
	if len(form.Errors) > 0 {
		status = http.StatusUnprocessableEntity
	} else {
		page, err := job.ListJobs(ctx, s.System, f, before, 50)
		if err != nil {
			return err
		}
		vm.Rows = page.Rows
		if page.Next != 0 {
			next := url.Values{}
			for k, v := range q {
				if k != "before" && len(v) > 0 && v[0] != "" {
					next.Set(k, v[0])
				}
			}
			next.Set("before", strconv.FormatInt(page.Next, 10))
			vm.NextURL = "/admin/jobs?" + next.Encode()
		}
	}
	if isHTMX(c) && c.Request().Header.Get("HX-Target") == "jobs-results" {
		return render(c, status, admin.JobsResults(vm))
	}
	return render(c, status, admin.JobsPage(vm))
}

// parseCursor reads a keyset cursor (an id); "" is the first page.
func parseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "Bad page cursor.")
	}
	return n, nil
}

var payloadField = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}(\.[A-Za-z0-9_-]{1,100}){0,7}$`)

// parsePayloadFilter turns "field=value" into the JSON object the payload
// must contain: {"field": value}. A dotted field nests ("a.b=1" is
// {"a": {"b": 1}}). The value is a number, true, false or null when it
// reads as one, a "quoted" JSON string when quoted, and a string
// otherwise.
func parsePayloadFilter(s string) (json.RawMessage, error) {
	field, value, ok := strings.Cut(s, "=")
	field, value = strings.TrimSpace(field), strings.TrimSpace(value)
	if !ok || field == "" || value == "" {
		return nil, errors.New(`Search the payload as field=value, e.g. tenant_id=1 or user.email="a@b.c".`)
	}
	if !payloadField.MatchString(field) {
		return nil, errors.New("A field name has letters, digits, _ and -, with dots for nesting.")
	}
	var v any
	switch {
	case value == "true", value == "false", value == "null":
		v = json.RawMessage(value)
	case strings.HasPrefix(value, `"`):
		var str string
		if err := json.Unmarshal([]byte(value), &str); err != nil {
			return nil, errors.New("The quoted value is not a valid JSON string.")
		}
		v = str
	default:
		if _, err := strconv.ParseFloat(value, 64); err == nil && json.Valid([]byte(value)) {
			v = json.RawMessage(value)
		} else {
			v = value
		}
	}
	parts := strings.Split(field, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		v = map[string]any{parts[i]: v}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("The value cannot be searched.")
	}
	return raw, nil
}

func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, errJobNotFound
	}
	return id, nil
}

// adminJob is one job: metadata, payload, attempt history and the audit
// events of the job and of its trace.
func (s *Server) adminJob(c echo.Context) error {
	id, err := parseJobID(c.Param("id"))
	if err != nil {
		return err
	}
	vm, err := s.jobVM(c, id)
	if err != nil {
		return err
	}
	vm.Flash = s.popFlash(c)
	return render(c, http.StatusOK, admin.JobPage(vm))
}

func (s *Server) jobVM(c echo.Context, id int64) (admin.JobVM, error) {
	ctx := c.Request().Context()
	r, err := s.Jobs.Get(ctx, id)
	if errors.Is(err, job.ErrNotFound) {
		return admin.JobVM{}, errJobNotFound
	}
	if err != nil {
		return admin.JobVM{}, err
	}
	tenants, _, err := s.tenantNames(c)
	if err != nil {
		return admin.JobVM{}, err
	}
	vm := admin.JobVM{R: r, Tenants: tenants, Payload: prettyJSON(r.Payload), PayloadHashHex: hex.EncodeToString(r.PayloadHash), RequestedBy: "system"}
	if r.RequestedBy != nil {
		names, err := s.Users.Names(ctx, []int64{*r.RequestedBy})
		if err != nil {
			return admin.JobVM{}, err
		}
		vm.RequestedBy = fmt.Sprintf("user #%d", *r.RequestedBy)
		if n, ok := names[*r.RequestedBy]; ok {
			vm.RequestedBy = n
		}
	}
	// The job's own events, then the rest of its trace (other jobs,
	// the request that enqueued it), newest first, without duplicates —
	// from the job's tenant only: a trace id arrives from clients
	// (traceparent), so another tenant can reuse it.
	byJob, err := audit.Search(ctx, s.System, audit.SearchQuery{JobID: &id, TenantID: &r.TenantID}, nil, 100)
	if err != nil {
		return admin.JobVM{}, err
	}
	events := byJob.Events
	if r.TraceID != "" {
		byTrace, err := audit.Search(ctx, s.System, audit.SearchQuery{TraceID: r.TraceID, TenantID: &r.TenantID}, nil, 100)
		if err != nil {
			return admin.JobVM{}, err
		}
		seen := map[int64]bool{}
		for _, e := range events {
			seen[e.ID] = true
		}
		for _, e := range byTrace.Events {
			if !seen[e.ID] {
				events = append(events, e)
			}
		}
		sortEventsNewestFirst(events)
	}
	if vm.Audit, err = s.staffAuditRows(c, events); err != nil {
		return admin.JobVM{}, err
	}
	return vm, nil
}

func sortEventsNewestFirst(events []audit.Recorded) {
	for i := 1; i < len(events); i++ {
		for j := i; j > 0 && events[j].ID > events[j-1].ID; j-- {
			events[j], events[j-1] = events[j-1], events[j]
		}
	}
}

func (s *Server) adminJobRetry(c echo.Context) error { return s.adminJobAction(job.ActionRetry)(c) }

func (s *Server) adminJobDiscard(c echo.Context) error { return s.adminJobAction(job.ActionDiscard)(c) }

// adminJobAction retries or discards one dead letter with a reason. With
// htmx it answers the dead-list row (replaced by a "done" row, or again
// with the reason's error and 422); without JavaScript it redirects back
// with a flash, or re-renders the page with the error (422).
func (s *Server) adminJobAction(action job.OperatorAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, err := parseJobID(c.Param("id"))
		if err != nil {
			return err
		}
		back := safeBack(c.FormValue("back"), "/admin/jobs/"+strconv.FormatInt(id, 10))
		reason := c.FormValue("reason")
		op := job.Operator{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx)}
		err = s.Jobs.ActOnDead(ctx, op, action, id, reason)
		switch {
		case errors.Is(err, job.ErrReasonRequired):
			return s.refuseJobAction(c, id, back, reason, reasonMessage(err))
		case errors.Is(err, job.ErrNotFound):
			return errJobNotFound
		case errors.Is(err, job.ErrNotDead):
			msg := fmt.Sprintf("Job #%d is no longer a dead letter (someone acted on it already); nothing changed.", id)
			if isHTMX(c) {
				return render(c, http.StatusOK, admin.DeadRowDone(id, "none", msg))
			}
			s.setFlash(c, msg)
			return c.Redirect(http.StatusSeeOther, back)
		case err != nil:
			return err
		}
		msg := s.actionDoneMessage(c, id, action)
		if isHTMX(c) {
			return render(c, http.StatusOK, admin.DeadRowDone(id, string(action), msg))
		}
		s.setFlash(c, msg)
		return c.Redirect(http.StatusSeeOther, back)
	}
}

func reasonMessage(err error) string {
	if strings.Contains(err.Error(), "at most") {
		return fmt.Sprintf("Give a reason of at most %d characters.", job.MaxReason)
	}
	return "A reason is required: it is recorded in the tenant's audit trail."
}

func (s *Server) actionDoneMessage(c echo.Context, id int64, action job.OperatorAction) string {
	where := "the tenant's"
	if r, err := s.Jobs.Get(c.Request().Context(), id); err == nil {
		if tenants, _, err := s.tenantNames(c); err == nil {
			where = tenants.Slug(r.TenantID) + "'s"
		}
	}
	if action == job.ActionDiscard {
		return fmt.Sprintf("Job #%d discarded (cancelled, kept for the record). Reason recorded in %s audit trail.", id, where)
	}
	return fmt.Sprintf("Job #%d retried: back to pending, due now. Reason recorded in %s audit trail.", id, where)
}

// refuseJobAction answers a refused action (no reason): 422, nothing
// changed, the message next to the reason field of the form used.
func (s *Server) refuseJobAction(c echo.Context, id int64, back, reason, msg string) error {
	ctx := c.Request().Context()
	if strings.HasPrefix(back, "/admin/dead") {
		if isHTMX(c) {
			page, err := job.ListJobs(ctx, s.System, job.AdminFilter{ID: id}, 0, 1)
			if err != nil {
				return err
			}
			if len(page.Rows) == 0 {
				return errJobNotFound
			}
			tenants, _, err := s.tenantNames(c)
			if err != nil {
				return err
			}
			return render(c, http.StatusUnprocessableEntity, admin.DeadRow(page.Rows[0], tenants, back, reason, msg))
		}
		u, _ := url.Parse(back)
		vm, _, err := s.deadVM(c, u.Query())
		if err != nil {
			return err
		}
		vm.RowID, vm.RowReason, vm.RowError = id, reason, msg
		return render(c, http.StatusUnprocessableEntity, admin.DeadPage(vm))
	}
	vm, err := s.jobVM(c, id)
	if err != nil {
		return err
	}
	vm.Reason, vm.ReasonError = reason, msg
	return render(c, http.StatusUnprocessableEntity, admin.JobPage(vm))
}
