package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/views/components"
	"github.com/jejakhq/jejak/views/observe"
)

// alertHistory is how many transitions /admin/alerts shows.
const alertHistory = 100

// adminAlerts lists the alert rules by state (firing, pending, quiet) with
// the latest transitions. With ?partial=live (htmx polling) it answers only
// the refreshing part.
func (s *Server) adminAlerts(c echo.Context) error {
	partial := c.QueryParam("partial")
	if partial != "" && partial != "live" {
		return echo.NewHTTPError(http.StatusBadRequest, "Unknown partial.")
	}
	o, err := s.Alerts.Overview(c.Request().Context(), alertHistory)
	if err != nil {
		return err
	}
	vm := observe.AlertsVM{}
	for _, st := range o.Rules {
		r := alertRuleRow(c.Request().Context(), st)
		switch st.State {
		case alert.StateFiring:
			vm.Firing = append(vm.Firing, r)
		case alert.StatePending:
			vm.Pending = append(vm.Pending, r)
		default:
			vm.OK = append(vm.OK, r)
		}
	}
	for _, h := range o.History {
		notice, noticeState := alertNotice(c.Request().Context(), h.Notice)
		vm.History = append(vm.History, observe.AlertEventRow{At: components.When(c.Request().Context(), h.At), Rule: h.Rule,
			State: h.State, Value: i18n.Decimal(c.Request().Context(), h.Value), Summary: alertSummary(c.Request().Context(), h.Summary),
			Notice: notice, NoticeState: noticeState})
	}
	if w := o.Webhook; w != nil {
		ctx := c.Request().Context()
		vm.Webhook = &observe.AlertWebhookVM{URL: w.URL, Status: i18n.T(ctx, "alerts.webhook_enabled"),
			Last: i18n.T(ctx, "alerts.webhook_none_yet")}
		if can(c, staff.Secrets) {
			vm.Webhook.Secret = w.Secret
		}
		if !w.Enabled {
			vm.Webhook.Status = i18n.T(ctx, "alerts.webhook_disabled", w.DisabledReason)
		}
		if w.Last != nil {
			vm.Webhook.Last = fmt.Sprintf("%s %s", w.Last.EventID, deliveryText(ctx, w.Last.State, w.Last.Attempts, w.Last.LastStatus, w.Last.LastError))
		}
	}
	if partial == "live" {
		return render(c, http.StatusOK, observe.AlertsLive(vm))
	}
	return render(c, http.StatusOK, observe.AlertsPage(vm))
}

// alertNotice says how far a transition's staff-webhook notification got.
func alertNotice(ctx context.Context, n alert.Notice) (text, state string) {
	switch {
	case !n.Sent:
		return i18n.T(ctx, "alerts.notice_not_sent"), ""
	case n.DeliveryState != "":
		return deliveryText(ctx, n.DeliveryState, n.Attempts, n.LastStatus, n.LastError), n.DeliveryState
	case n.OutboxState == "failed":
		return i18n.T(ctx, "alerts.notice_outbox_failed"), "failed"
	case n.OutboxState == "delivered":
		return i18n.T(ctx, "alerts.notice_published"), "pending"
	case n.OutboxState != "":
		return i18n.T(ctx, "alerts.notice_queued"), "pending"
	}
	// The message was published and pruned, and no delivery was made: the
	// endpoint was disabled when the event was fanned out.
	return i18n.T(ctx, "alerts.notice_endpoint_disabled"), "failed"
}

// deliveryText describes a webhook delivery's state.
func deliveryText(ctx context.Context, state string, attempts, status int, lastErr string) string {
	last := lastErr
	if status != 0 {
		last = fmt.Sprintf("HTTP %d", status)
	}
	switch {
	case state == "succeeded":
		return i18n.T(ctx, "alerts.delivery_succeeded", last, attempts)
	case state == "pending" && attempts == 0:
		return i18n.T(ctx, "alerts.delivery_sending")
	case state == "pending":
		return i18n.T(ctx, "alerts.delivery_retrying", attempts, last)
	}
	return i18n.Plural(ctx, "alerts.delivery_ended", int64(attempts), i18n.Enum(ctx, "delivery", state), attempts, last)
}

// catalogOr is key in the reader's language, or english when no catalog
// has key (a rule added without its translations).
func catalogOr(ctx context.Context, key, english string) string {
	if i18n.Has(key) {
		return i18n.T(ctx, key)
	}
	return english
}

// alertSummary shows a stored summary (English) in the reader's language
// when it is one the catalogs know, as stored otherwise.
func alertSummary(ctx context.Context, stored string) string {
	if t := alert.ParseSummary(stored); t.Key != "" && i18n.Has(t.Key) {
		return countedT(ctx, t.Key, t.Args)
	}
	return stored
}

func alertRuleRow(ctx context.Context, st alert.Status) observe.AlertRuleRow {
	r := observe.AlertRuleRow{Name: st.Rule.Name, Title: catalogOr(ctx, st.Rule.TitleKey(), st.Rule.Title), State: st.State,
		Summary: alertSummary(ctx, st.Summary), Description: catalogOr(ctx, st.Rule.DescriptionKey(), st.Rule.Description),
		Runbook: catalogOr(ctx, st.Rule.RunbookKey(), st.Rule.Runbook), Value: i18n.Decimal(ctx, st.Value),
		Condition: i18n.T(ctx, "alerts.condition", i18n.Decimal(ctx, st.Rule.Threshold), i18n.Duration(ctx, st.Rule.For))}
	if !st.Since.IsZero() {
		r.Since = components.When(ctx, st.Since)
	}
	if !st.EvaluatedAt.IsZero() {
		r.EvaluatedAt = st.EvaluatedAt.UTC().Format(time.RFC3339)
	}
	return r
}

// firingAlerts is the banner of firing alerts on the staff overview; it
// renders nothing when none fire or alerts are not wired.
func (s *Server) firingAlerts(ctx context.Context) ([]observe.AlertRuleRow, error) {
	if s.Alerts == nil {
		return nil, nil
	}
	firing, err := s.Alerts.Firing(ctx)
	if err != nil {
		return nil, err
	}
	return alertRuleRows(ctx, firing), nil
}

func alertRuleRows(ctx context.Context, sts []alert.Status) []observe.AlertRuleRow {
	var rows []observe.AlertRuleRow
	for _, st := range sts {
		rows = append(rows, alertRuleRow(ctx, st))
	}
	return rows
}
