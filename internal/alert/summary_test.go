package alert

import (
	"reflect"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/i18n"
)

// TestSummariesReadBack: every summary a rule writes reads back as its
// catalog key and values, so the dashboard can show it in the reader's
// language while the stored text (and the webhook payload) stays English.
func TestSummariesReadBack(t *testing.T) {
	for _, tc := range []struct {
		key  string
		args []any
	}{
		{sumDead, []any{int64(1234)}},
		{sumNoOutbox, nil},
		{sumOutboxLag, []any{2*time.Minute + 5*time.Second}},
		{sumDueFlowing, []any{int64(7), int64(3)}},
		{sumDueStalled, []any{int64(7)}},
		{sumPrincipal, []any{int64(42), int64(3), int64(1500), float64(37)}},
		{sumWorker, []any{"w-bad host 2", float64(80), float64(5)}},
		{sumPaused, []any{"test.flaky, test.other"}},
		{sumNoWorker, nil},
	} {
		s := summary(tc.key, tc.args...)
		got := ParseSummary(s)
		if got.Key != tc.key || (len(tc.args) > 0 && !reflect.DeepEqual(got.Args, tc.args)) || (len(tc.args) == 0 && len(got.Args) != 0) {
			t.Errorf("%q read back as %+v, want %s %v", s, got, tc.key, tc.args)
		}
	}
	if got := ParseSummary("something a newer version wrote"); got.Key != "" {
		t.Errorf("unknown summary parsed as %+v", got)
	}
	for key := range summaries.English() {
		if key == "" {
			t.Fatal("empty key")
		}
	}
}

// TestRuleTextsInTheCatalogs: each rule's title, description and runbook
// and each summary have catalog entries in both languages, and the English
// entries say what the rules and summaries say (so the dashboard and the
// webhook payload do not drift apart).
func TestRuleTextsInTheCatalogs(t *testing.T) {
	for _, r := range DefaultRules(Sources{}) {
		for key, english := range map[string]string{r.TitleKey(): r.Title, r.DescriptionKey(): r.Description, r.RunbookKey(): r.Runbook} {
			if got := i18n.In(i18n.EN, key); got != english {
				t.Errorf("%s: catalog en %q, rule says %q", key, got, english)
			}
			if got := i18n.In(i18n.ID, key); got == english || got == key {
				t.Errorf("%s: no Indonesian (%q)", key, got)
			}
		}
	}
	for key, english := range summaries.English() {
		if !i18n.Has(key) || i18n.Catalogs()[i18n.EN][key] != english {
			t.Errorf("%s: catalog en %q, summary written as %q", key, i18n.Catalogs()[i18n.EN][key], english)
		}
	}
}
