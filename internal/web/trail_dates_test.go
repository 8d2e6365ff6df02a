package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTrailDayFieldsSpeakTheReadersLanguage: the trail's from/to fields
// are text fields whose format is explained in the page's language (a
// date picker would follow the browser's), and a day written that way
// filters.
func TestTrailDayFieldsSpeakTheReadersLanguage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	for lang, hint := range map[string]string{"id": "Tahun-bulan-tanggal, mis. 2026-11-22.", "en": "Year-month-day, e.g. 2026-11-22."} {
		a := c.getLang("/t/toko-bunga-melati/audit", lang)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d", lang, a.status)
		}
		for _, id := range []string{"f-from", "f-to"} {
			if !strings.Contains(a.body, `id="`+id+`" type="text" inputmode="numeric"`) || !strings.Contains(a.body, `id="`+id+`-hint" class="muted small">`+hint) {
				t.Errorf("%s: field %s is not a day field explained in the page's language", lang, id)
			}
		}
		if strings.Contains(a.body, `type="date"`) {
			t.Errorf("%s: a browser date picker is still on the trail", lang)
		}
	}
	if a := c.get("/t/toko-bunga-melati/audit?from=2026-01-01&to=2026-12-31"); a.status != http.StatusOK {
		t.Fatalf("filtering by days: %d", a.status)
	}
	if a := c.get("/t/toko-bunga-melati/audit?from=31-12-2026"); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("a day in another format: %d, want 422", a.status)
	}
}
