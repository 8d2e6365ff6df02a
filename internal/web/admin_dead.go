package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/admin"
)

// deadFilter reads the dead-letter filter from query or form values;
// problems land in form.Errors.
func deadFilter(v url.Values, all []job.TenantName) (admin.DeadForm, job.DeadFilter) {
	form := admin.DeadForm{
		Kind: strings.TrimSpace(v.Get("kind")), Class: v.Get("class"), Tenant: v.Get("tenant"), Flagged: v.Get("flagged"),
		Errors: map[string]string{},
	}
	f := job.DeadFilter{Kind: form.Kind, Class: job.Class(form.Class)}
	if form.Class != "" && !job.ValidClass(job.Class(form.Class)) {
		form.Errors["class"] = "Unknown failure class."
	}
	if form.Tenant != "" {
		id, ok := tenantBySlug(all, form.Tenant)
		if !ok {
			form.Errors["tenant"] = "Unknown tenant."
		}
		f.TenantID = id
	}
	switch form.Flagged {
	case "":
	case "yes", "no":
		b := form.Flagged == "yes"
		f.Flagged = &b
	default:
		form.Errors["flagged"] = "Choose yes or no."
	}
	if len(form.Kind) > job.MaxKindLen {
		form.Errors["kind"] = fmt.Sprintf("A kind is at most %d characters.", job.MaxKindLen)
	}
	return form, f
}

// deadVM builds the dead-letter page for a filter.
func (s *Server) deadVM(c echo.Context, v url.Values) (admin.DeadVM, job.DeadFilter, error) {
	ctx := c.Request().Context()
	tenants, all, err := s.tenantNames(c)
	if err != nil {
		return admin.DeadVM{}, job.DeadFilter{}, err
	}
	form, f := deadFilter(v, all)
	before, err := keyset.Cursor("before", v.Get("before"))
	if err != nil {
		return admin.DeadVM{}, f, err
	}
	vm := admin.DeadVM{Form: form, AllTenants: all, Tenants: tenants, FirstPage: before == 0}
	if vm.Groups, err = job.DeadGroups(ctx, s.System, f.TenantID); err != nil {
		return vm, f, err
	}
	if len(form.Errors) > 0 {
		return vm, f, nil
	}
	page, err := job.ListDead(ctx, s.System, f, before, 50)
	if err != nil {
		return vm, f, err
	}
	vm.Rows = page.Rows
	if page.Next != 0 {
		next := form.Values()
		next.Set("before", strconv.FormatInt(page.Next, 10))
		vm.NextURL = "/admin/dead?" + next.Encode()
	}
	return vm, f, nil
}

// adminDead lists dead letters grouped by kind and class, then one keyset
// page of them with retry/discard per row and the bulk actions.
func (s *Server) adminDead(c echo.Context) error {
	vm, _, err := s.deadVM(c, c.QueryParams())
	if err != nil {
		return err
	}
	vm.Flash = s.popFlash(c)
	status := http.StatusOK
	if len(vm.Form.Errors) > 0 {
		status = http.StatusUnprocessableEntity
	}
	return render(c, status, admin.DeadPage(vm))
}

// bulkVM counts what a bulk action over the filter in v would change.
func (s *Server) bulkVM(c echo.Context, v url.Values) (admin.BulkVM, job.DeadFilter, error) {
	action, ok := job.ParseAction(v.Get("action"))
	if !ok {
		return admin.BulkVM{}, job.DeadFilter{}, echo.NewHTTPError(http.StatusBadRequest, "Unknown bulk action.")
	}
	_, all, err := s.tenantNames(c)
	if err != nil {
		return admin.BulkVM{}, job.DeadFilter{}, err
	}
	form, f := deadFilter(v, all)
	if len(form.Errors) > 0 {
		return admin.BulkVM{}, f, echo.NewHTTPError(http.StatusUnprocessableEntity, "Invalid filter: fix it on the dead-letter page first.")
	}
	n, err := job.CountDead(c.Request().Context(), s.System, f, job.MaxBulk+1)
	if err != nil {
		return admin.BulkVM{}, f, err
	}
	b := admin.BulkVM{Action: string(action), Form: form, Count: min(n.N, job.MaxBulk), Capped: n.N > job.MaxBulk, MaxID: n.MaxID, Cap: job.MaxBulk}
	return b, f, nil
}

// adminDeadBulkPreview shows how many dead letters a bulk action over the
// current filter will change, and asks for the reason. htmx loads it in
// place; without JavaScript it is a page.
func (s *Server) adminDeadBulkPreview(c echo.Context) error {
	b, _, err := s.bulkVM(c, c.QueryParams())
	if err != nil {
		return err
	}
	if isHTMX(c) {
		return render(c, http.StatusOK, admin.BulkConfirm(b))
	}
	return render(c, http.StatusOK, admin.BulkPage(b))
}

// adminDeadBulk runs a confirmed bulk action: at most the jobs its preview
// counted (ids up to max_id, still dead, at most job.MaxBulk), each with an
// audit event in its tenant's trail. A missing reason re-renders the
// confirmation with the message (422) and changes nothing.
func (s *Server) adminDeadBulk(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "Bad form.")
	}
	maxID, err := strconv.ParseInt(form.Get("max_id"), 10, 64)
	if err != nil || maxID < 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "Bad bulk confirmation: open the preview again.")
	}
	action, ok := job.ParseAction(form.Get("action"))
	if !ok {
		return echo.NewHTTPError(http.StatusBadRequest, "Unknown bulk action.")
	}
	_, all, err := s.tenantNames(c)
	if err != nil {
		return err
	}
	dform, f := deadFilter(form, all)
	if len(dform.Errors) > 0 {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "Invalid filter: fix it on the dead-letter page first.")
	}
	reason := form.Get("reason")
	if _, err := job.CheckReason(reason); err != nil {
		b, _, berr := s.bulkVM(c, form)
		if berr != nil {
			return berr
		}
		b.Reason, b.ReasonError = reason, apperr.FieldsOf(err)["reason"]
		return render(c, http.StatusUnprocessableEntity, admin.BulkPage(b))
	}
	if maxID == 0 {
		s.setFlash(c, "Nothing to do: no dead letters matched.")
		return c.Redirect(http.StatusSeeOther, dform.URL())
	}
	f.MaxID = maxID
	ctx := c.Request().Context()
	op := job.Operator{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx)}
	n, err := s.Jobs.ActOnDeadMatching(ctx, op, action, f, reason)
	if err != nil {
		if n > 0 {
			// Earlier batches committed; say so rather than hide it.
			s.setFlash(c, fmt.Sprintf("%s stopped after %d job(s): %s", action, n, "internal error"))
			s.Logger.ErrorContext(ctx, "bulk dead-letter action failed", "error", err.Error(), "done", n)
			return c.Redirect(http.StatusSeeOther, dform.URL())
		}
		return err
	}
	verb := "Retried"
	if action == job.ActionDiscard {
		verb = "Discarded"
	}
	s.setFlash(c, fmt.Sprintf("%s %d dead job(s) matching %s. The reason is recorded in each tenant's audit trail.", verb, n, dform.Describe()))
	return c.Redirect(http.StatusSeeOther, dform.URL())
}
