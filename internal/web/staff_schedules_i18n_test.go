package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/clock"
)

// TestSchedulesFollowTheLanguage: /admin's schedules say what they do,
// how often and what their last run did in the reader's language; the
// outbox retention's age reads as words, not Go's "168h0m0s".
func TestSchedulesFollowTheLanguage(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	if _, err := f.sched.Tick(context.Background()); err != nil {
		t.Fatalf("tick: %v", err)
	}
	tenants := f.count(`SELECT jobs FROM schedule_runs WHERE name = 'subscription.sweep'`)
	staff := f.client()
	staff.login("support@jejak.test")
	want := map[string][]string{
		"id": {"hitung ulang status setiap langganan", "kirim laporan mingguan setiap organisasi", ">mingguan<", ">per jam<",
			"hapus pesan outbox yang terkirim lebih dari ", " jam lalu", "tugas selesai dipangkas", "pesan terkirim dipangkas",
			">" + grouped(tenants, ".") + " organisasi<"},
		"en": {"recompute every subscription&#39;s status", "send each tenant&#39;s weekly report", ">weekly<", ">hourly<",
			"delete outbox messages delivered more than ", " hours ago", "finished jobs pruned", "delivered messages pruned",
			">" + grouped(tenants, ",") + " tenants<"},
	}
	for lang, ws := range want {
		other := want["en"]
		if lang == "en" {
			other = want["id"]
		}
		a := staff.getLang("/admin", lang)
		if a.status != http.StatusOK {
			t.Fatalf("/admin in %s: %d", lang, a.status)
		}
		for _, w := range ws {
			if !strings.Contains(a.body, w) {
				t.Errorf("/admin in %s lacks %q", lang, w)
			}
		}
		for _, n := range other[:4] {
			if strings.Contains(a.body, n) {
				t.Errorf("/admin in %s shows %q (the other language)", lang, n)
			}
		}
		if strings.Contains(a.body, "h0m0s") {
			t.Errorf("/admin in %s shows a Go duration", lang)
		}
	}
}
