package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/alert"
)

// TestAdminAlertsPage: a rule driven to firing shows under Firing on
// /admin/alerts with its history, in the live partial htmx polls, and as a
// banner on /admin; a resolved rule moves back to the quiet list.
func TestAdminAlertsPage(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	var value float64 = 7
	rules := alert.DefaultRules(alert.Sources{})
	for i := range rules {
		if rules[i].Name == alert.RuleDeadLetters {
			rules[i].For = 0
			rules[i].Eval = func(context.Context, alert.Reader, time.Time) (float64, string, error) {
				return value, "7 jobs dead-lettered in the last 10 minutes", nil
			}
		}
	}
	ev := alert.New(alert.Config{Pool: f.db.System, Logger: quietLog(), Rules: rules})
	if _, err := ev.EvaluateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("admin@jejak.test")
	page := c.get("/admin/alerts")
	if page.status != 200 {
		t.Fatalf("alerts page: %d", page.status)
	}
	firing := section(page.body, `data-testid="alerts-firing"`, "</table>")
	if !strings.Contains(firing, `data-rule="dead_letters_growing"`) || strings.Contains(firing, `data-rule="outbox_lag"`) {
		t.Fatalf("firing table: %s", firing)
	}
	if !strings.Contains(page.body, `data-testid="alert-event" data-rule="dead_letters_growing" data-state="firing"`) ||
		!strings.Contains(page.body, `data-testid="alert-event" data-rule="dead_letters_growing" data-state="pending"`) {
		t.Fatal("history lacks the pending and firing transitions")
	}
	if !strings.Contains(page.body, "Open /admin/dead") {
		t.Fatal("no runbook text for the firing rule")
	}
	live := c.get("/admin/alerts?partial=live")
	if live.status != 200 || strings.Contains(live.body, "<html") || !strings.Contains(live.body, `id="alerts-live"`) {
		t.Fatalf("live partial: %d", live.status)
	}
	if bad := c.get("/admin/alerts?partial=nope"); bad.status != 400 {
		t.Fatalf("unknown partial: %d", bad.status)
	}
	home := c.get("/admin")
	if !strings.Contains(home.body, `data-testid="firing-alerts"`) || !strings.Contains(home.body, "Dead letters growing") {
		t.Fatal("/admin does not show the firing alert")
	}

	value = 0
	if _, err := ev.EvaluateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	page = c.get("/admin/alerts")
	if strings.Contains(page.body, `data-testid="alerts-firing"`) || !strings.Contains(page.body, `data-state="resolved"`) {
		t.Fatal("resolved alert still firing, or no resolved transition in history")
	}
	if home := c.get("/admin"); strings.Contains(home.body, `data-testid="firing-alerts"`) {
		t.Fatal("/admin still shows a resolved alert")
	}
}

// section returns body from the first start marker to the next end marker.
func section(body, start, end string) string {
	i := strings.Index(body, start)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], end)
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}
