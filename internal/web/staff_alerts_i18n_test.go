package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/alert"
)

// TestAlertTextsFollowTheLanguage: the rules' titles, descriptions,
// runbooks, conditions and summaries (stored in English) read in the
// reader's language on /admin/alerts and in /admin's banner.
func TestAlertTextsFollowTheLanguage(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	rules := alert.DefaultRules(alert.Sources{})
	for i := range rules {
		switch rules[i].Name {
		case alert.RuleDeadLetters:
			rules[i].Eval = func(context.Context, alert.Reader, time.Time) (float64, string, error) {
				return 1234, "1234 jobs dead-lettered in the last 10 minutes", nil
			}
		case alert.RuleWorkerFailing:
			rules[i].For = 0
			rules[i].Eval = func(context.Context, alert.Reader, time.Time) (float64, string, error) {
				return 16, "worker w-bad fails 80% of attempts, peers' median 5%", nil
			}
		}
	}
	ev := alert.New(alert.Config{Pool: f.db.System, Logger: quietLog(), Rules: rules})
	if _, err := ev.EvaluateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	c.login("support@jejak.test")
	want := map[string][]string{
		"id": {"Surat mati bertambah", "Tugas yang menjadi surat mati dalam 10 menit terakhir.", "Buka /admin/dead, kelompokkan per jenis",
			"1.234 tugas menjadi surat mati dalam 10 menit terakhir", "Satu worker gagal jauh lebih sering daripada rekannya",
			"worker w-bad gagal pada 80% percobaan, median rekannya 5%", "&gt; 2 selama 1 menit", "Antrean macet"},
		"en": {"Dead letters growing", "Jobs that became dead letters in the last 10 minutes.", "Open /admin/dead, group by kind",
			"1,234 jobs dead-lettered in the last 10 minutes", "One worker failing far more than its peers",
			"worker w-bad fails 80% of attempts, peers&#39; median 5%", "&gt; 2 for 1 minute", "Queue stalled"},
	}
	for lang, ws := range want {
		other := want["en"]
		if lang == "en" {
			other = want["id"]
		}
		page := c.getLang("/admin/alerts", lang)
		if page.status != 200 {
			t.Fatalf("alerts in %s: %d", lang, page.status)
		}
		for _, w := range ws {
			if !strings.Contains(page.body, w) {
				t.Errorf("/admin/alerts in %s lacks %q", lang, w)
			}
		}
		for _, n := range other {
			if strings.Contains(page.body, n) {
				t.Errorf("/admin/alerts in %s shows %q (the other language)", lang, n)
			}
		}
		if home := c.getLang("/admin", lang); !strings.Contains(home.body, ws[4]) || !strings.Contains(home.body, ws[5]) {
			t.Errorf("/admin in %s: the firing banner lacks %q or %q", lang, ws[4], ws[5])
		}
	}
}
