package web

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/admin"
)

// errJobNotFound answers malformed job ids like unknown ones.
var errJobNotFound = job.ErrNotFound

// adminJobs lists jobs across tenants with filters and keyset pages. Bad
// filter values answer 422 with the message next to the field.
func (s *Server) adminJobs(c echo.Context) error {
	q := c.QueryParams()
	form := admin.JobsForm{
		State: q.Get("state"), Kind: strings.TrimSpace(q.Get("kind")), Tenant: q.Get("tenant"),
		Queue: strings.TrimSpace(q.Get("queue")), ID: strings.TrimSpace(q.Get("id")),
		Trace: strings.TrimSpace(q.Get("trace")), Key: q.Get("key"), Payload: strings.TrimSpace(q.Get("payload")),
		Errors: map[string]string{},
	}
	before, err := keyset.Cursor("before", q.Get("before"))
	if err != nil {
		return err
	}
	res, err := s.Console.Jobs(c.Request().Context(), console.JobQuery{
		State: form.State, Kind: form.Kind, Tenant: form.Tenant, Queue: form.Queue,
		ID: form.ID, Trace: form.Trace, Key: form.Key, Payload: form.Payload,
	}, before)
	status := http.StatusOK
	if fields := fieldMessages(c.Request().Context(), err); fields != nil {
		form.Errors, err, status = fields, nil, http.StatusUnprocessableEntity
	}
	if err != nil {
		return err
	}
	tenants, all := adminTenants(res.Tenants)
	vm := admin.JobsVM{Form: form, AllTenants: all, Tenants: tenants, FirstPage: before == 0, Rows: adminRows(res.Rows)}
	if res.SearchedFrom != 0 {
		vm.SearchedFrom = strconv.FormatInt(res.SearchedFrom, 10)
	}
	if res.Next != 0 {
		next := url.Values{}
		for k, v := range q {
			if k != "before" && len(v) > 0 && v[0] != "" {
				next.Set(k, v[0])
			}
		}
		next.Set("before", keyset.Format(res.Next))
		vm.NextURL = "/admin/jobs?" + next.Encode()
	}
	if isHTMX(c) && c.Request().Header.Get("HX-Target") == "jobs-results" {
		return render(c, status, admin.JobsResults(vm))
	}
	return render(c, status, admin.JobsPage(vm))
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
	if isHTMX(c) && c.Request().Header.Get("HX-Target") == "job-live" {
		return s.adminJobLive(c, id)
	}
	vm, err := s.jobVM(c, id)
	if err != nil {
		return err
	}
	vm.Flash = s.popFlash(c)
	return render(c, http.StatusOK, admin.JobPage(vm))
}

// adminJobLive is the job page's live state, polled while the job is
// pending or running: one row of the job list (no history, no audit
// events), so following a job costs a primary-key read per poll.
func (s *Server) adminJobLive(c echo.Context, id int64) error {
	res, err := s.Console.Jobs(c.Request().Context(), console.JobQuery{ID: strconv.FormatInt(id, 10)}, 0)
	if err != nil {
		return err
	}
	if len(res.Rows) == 0 {
		return errJobNotFound
	}
	return render(c, http.StatusOK, admin.JobLiveUpdate(adminRow(res.Rows[0])))
}

func (s *Server) jobVM(c echo.Context, id int64) (admin.JobVM, error) {
	ctx := c.Request().Context()
	v, err := s.Console.Job(ctx, id)
	if err != nil {
		return admin.JobVM{}, err
	}
	r := v.Job
	tenants, _ := adminTenants(v.Tenants)
	vm := admin.JobVM{R: adminDetail(r), Tenants: tenants, Payload: prettyJSON(r.Payload),
		PayloadHashHex: hex.EncodeToString(r.PayloadHash), RequestedBy: i18n.T(ctx, "support.system")}
	if r.RequestedBy != nil {
		names, err := s.Users.Names(ctx, []int64{*r.RequestedBy})
		if err != nil {
			return admin.JobVM{}, err
		}
		vm.RequestedBy = i18n.T(ctx, "support.user_n", strconv.FormatInt(*r.RequestedBy, 10))
		if n, ok := names[*r.RequestedBy]; ok {
			vm.RequestedBy = n
		}
	}
	vm.Audit = s.staffAuditRows(c, v.Events)
	if err := s.recordStaffViews(c, "/admin/jobs", v.Events); err != nil {
		return admin.JobVM{}, err
	}
	links, err := s.Console.Dependencies(ctx, r.TenantID, id)
	if err != nil {
		return admin.JobVM{}, err
	}
	vm.WaitsFor, vm.WaitsForState = links.WaitsFor, string(links.WaitsForState)
	for _, d := range links.NeededBy {
		vm.NeededBy = append(vm.NeededBy, admin.DepRow{ID: d.ID, Kind: d.Kind, State: string(d.State)})
	}
	if r.PayloadVersion > 1 {
		vm.PayloadVersion = "v" + strconv.Itoa(r.PayloadVersion)
	}
	return vm, nil
}

func (s *Server) adminJobRetry(c echo.Context) error { return s.adminJobAction(console.ActionRetry)(c) }

func (s *Server) adminJobDiscard(c echo.Context) error {
	return s.adminJobAction(console.ActionDiscard)(c)
}

// adminJobAction retries or discards one dead letter with a reason. With
// htmx it answers the dead-list row (replaced by a "done" row, or again
// with the reason's error and 422); without JavaScript it redirects back
// with a flash, or re-renders the page with the error (422).
func (s *Server) adminJobAction(action console.Action) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, err := parseJobID(c.Param("id"))
		if err != nil {
			return err
		}
		back := safeBack(c.FormValue("back"), "/admin/jobs/"+strconv.FormatInt(id, 10))
		reason := c.FormValue("reason")
		op := console.Operator{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx),
			Confirmed: c.FormValue("confirm") == "permanent"}
		t, err := s.Console.Act(ctx, op, action, id, reason)
		if msg := fieldMessage(ctx, err, "reason"); msg != "" {
			return s.refuseJobAction(c, id, back, reason, msg)
		}
		if pf, ok := errors.AsType[*console.PermanentFailureError](err); ok {
			return s.confirmRetry(c, pf, back, reason)
		}
		if need, ok := errors.AsType[*console.NeedsApprovalError](err); ok {
			return s.requestReplay(c, need, reason)
		}
		msg := actionDoneMessage(ctx, id, action, t.Slug)
		switch {
		case errors.Is(err, console.ErrNotDead):
			msg = i18n.T(ctx, "admin.flash_not_dead", id)
			action = "none"
		case err != nil:
			return err
		}
		if isHTMX(c) {
			return render(c, http.StatusOK, admin.DeadRowDone(id, string(action), msg))
		}
		s.setFlash(c, msg)
		return c.Redirect(http.StatusSeeOther, back)
	}
}

func actionDoneMessage(ctx context.Context, id int64, action console.Action, slug string) string {
	switch {
	case action == console.ActionDiscard && slug == "":
		return i18n.T(ctx, "admin.flash_discarded_any", id)
	case action == console.ActionDiscard:
		return i18n.T(ctx, "admin.flash_discarded", id, slug)
	case slug == "":
		return i18n.T(ctx, "admin.flash_retried_any", id)
	}
	return i18n.T(ctx, "admin.flash_retried", id, slug)
}

// confirmRetry asks again before retrying a job that failed permanently
// (nothing changed yet): in the dead-letter row with htmx, else on the
// job's page. Confirming posts the same reason with confirm=permanent.
func (s *Server) confirmRetry(c echo.Context, pf *console.PermanentFailureError, back, reason string) error {
	if isHTMX(c) && strings.HasPrefix(back, "/admin/dead") {
		return render(c, http.StatusOK, admin.DeadRowConfirm(pf.JobID, back, reason, pf.LastError))
	}
	vm, err := s.jobVM(c, pf.JobID)
	if err != nil {
		return err
	}
	vm.Reason, vm.Confirming, vm.ConfirmError = reason, true, pf.LastError
	return render(c, http.StatusOK, admin.JobPage(vm))
}

// refuseJobAction answers a refused action (no reason): 422, nothing
// changed, the message next to the reason field of the form used.
func (s *Server) refuseJobAction(c echo.Context, id int64, back, reason, msg string) error {
	ctx := c.Request().Context()
	if strings.HasPrefix(back, "/admin/dead") {
		if isHTMX(c) {
			res, err := s.Console.Jobs(ctx, console.JobQuery{ID: strconv.FormatInt(id, 10)}, 0)
			if err != nil {
				return err
			}
			if len(res.Rows) == 0 {
				return errJobNotFound
			}
			tenants, _ := adminTenants(res.Tenants)
			return render(c, http.StatusUnprocessableEntity, admin.DeadRow(adminRow(res.Rows[0]), tenants, back, reason, msg))
		}
		u, _ := url.Parse(back)
		vm, err := s.deadVM(c, u.Query())
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
