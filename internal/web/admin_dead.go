package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/admin"
)

// deadForm reads the dead-letter filter from query or form values as typed.
func deadForm(v url.Values) admin.DeadForm {
	return admin.DeadForm{
		Kind: strings.TrimSpace(v.Get("kind")), Class: v.Get("class"), Tenant: v.Get("tenant"), Flagged: v.Get("flagged"),
		Errors: map[string]string{},
	}
}

func deadQuery(f admin.DeadForm) console.DeadQuery {
	return console.DeadQuery{Kind: f.Kind, Class: f.Class, Tenant: f.Tenant, Flagged: f.Flagged}
}

// deadVM builds the dead-letter page for a filter; filter problems land in
// the form's errors (the caller answers 422).
func (s *Server) deadVM(c echo.Context, v url.Values) (admin.DeadVM, error) {
	form := deadForm(v)
	before, err := keyset.Cursor("before", v.Get("before"))
	if err != nil {
		return admin.DeadVM{}, err
	}
	res, err := s.Console.Dead(c.Request().Context(), deadQuery(form), before)
	if fields := fieldMessages(c.Request().Context(), err); fields != nil {
		form.Errors, err = fields, nil
	}
	if err != nil {
		return admin.DeadVM{}, err
	}
	tenants, all := adminTenants(res.Tenants)
	vm := admin.DeadVM{Form: form, AllTenants: all, Tenants: tenants, FirstPage: before == 0,
		Groups: adminDeadGroups(res.Groups), Rows: adminRows(res.Rows)}
	if res.Next != 0 {
		next := form.Values()
		next.Set("before", keyset.Format(res.Next))
		vm.NextURL = "/admin/dead?" + next.Encode()
	}
	return vm, nil
}

// adminDead lists dead letters grouped by kind and class, then one keyset
// page of them with retry/discard per row and the bulk actions.
func (s *Server) adminDead(c echo.Context) error {
	vm, err := s.deadVM(c, c.QueryParams())
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

var errBadBulkFilter = echo.NewHTTPError(http.StatusUnprocessableEntity, "Invalid filter: fix it on the dead-letter page first.")

// bulkVM counts what a bulk action over the filter in v would change.
func (s *Server) bulkVM(c echo.Context, v url.Values) (admin.BulkVM, error) {
	action, ok := console.ParseAction(v.Get("action"))
	if !ok {
		return admin.BulkVM{}, echo.NewHTTPError(http.StatusBadRequest, "Unknown bulk action.")
	}
	form := deadForm(v)
	p, err := s.Console.BulkPreview(c.Request().Context(), deadQuery(form))
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		return admin.BulkVM{}, errBadBulkFilter
	}
	if err != nil {
		return admin.BulkVM{}, err
	}
	return admin.BulkVM{Action: string(action), Form: form, Count: p.Count, Capped: p.Capped, MaxID: p.MaxID, Cap: console.MaxBulk,
		Permanent: p.Permanent}, nil
}

// adminDeadBulkPreview shows how many dead letters a bulk action over the
// current filter will change, and asks for the reason. htmx loads it in
// place; without JavaScript it is a page.
func (s *Server) adminDeadBulkPreview(c echo.Context) error {
	b, err := s.bulkVM(c, c.QueryParams())
	if err != nil {
		return err
	}
	if isHTMX(c) {
		return render(c, http.StatusOK, admin.BulkConfirm(b))
	}
	return render(c, http.StatusOK, admin.BulkPage(b))
}

// adminDeadBulk runs a confirmed bulk action: at most the jobs its preview
// counted (ids up to max_id, still dead, at most console.MaxBulk), each
// with an audit event in its tenant's trail. A missing reason re-renders
// the confirmation with the message (422) and changes nothing.
func (s *Server) adminDeadBulk(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "Bad form.")
	}
	maxID, err := strconv.ParseInt(form.Get("max_id"), 10, 64)
	if err != nil || maxID < 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "Bad bulk confirmation: open the preview again.")
	}
	action, ok := console.ParseAction(form.Get("action"))
	if !ok {
		return echo.NewHTTPError(http.StatusBadRequest, "Unknown bulk action.")
	}
	dform := deadForm(form)
	ctx := c.Request().Context()
	op := console.Operator{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx)}
	reason := form.Get("reason")
	n, err := s.Console.Bulk(ctx, op, action, deadQuery(dform), maxID, reason)
	if msg := fieldMessage(ctx, err, "reason"); msg != "" {
		b, berr := s.bulkVM(c, form)
		if berr != nil {
			return berr
		}
		b.Reason, b.ReasonError = reason, msg
		return render(c, http.StatusUnprocessableEntity, admin.BulkPage(b))
	}
	switch {
	case apperr.CodeOf(err) == apperr.CodeInvalid:
		return errBadBulkFilter
	case err != nil && n > 0:
		// Earlier batches committed; say so rather than hide it.
		key := "admin.flash_bulk_stopped_retry"
		if action == console.ActionDiscard {
			key = "admin.flash_bulk_stopped_discard"
		}
		s.setFlash(c, i18n.Plural(ctx, key, int64(n), n))
		s.Logger.ErrorContext(ctx, "bulk dead-letter action failed", "error", err.Error(), "done", n)
		return c.Redirect(http.StatusSeeOther, dform.URL())
	case err != nil:
		return err
	case maxID == 0:
		s.setFlash(c, i18n.T(ctx, "admin.flash_bulk_nothing"))
		return c.Redirect(http.StatusSeeOther, dform.URL())
	}
	key := "admin.flash_bulk_retried"
	if action == console.ActionDiscard {
		key = "admin.flash_bulk_discarded"
	}
	s.setFlash(c, i18n.Plural(ctx, key, int64(n), n, dform.Describe(ctx)))
	return c.Redirect(http.StatusSeeOther, dform.URL())
}
