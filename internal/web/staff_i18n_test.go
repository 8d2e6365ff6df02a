package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestStaffPagesFollowTheLanguage: every staff page, and the tenant pages
// whose remaining strings were translated, read as the reader chose:
// Accept-Language id shows the page's own Indonesian heading, table
// headers, buttons and badges and none of their English, en the reverse.
// Values that URLs and forms use (state=dead, class=permanent) stay codes.
func TestStaffPagesFollowTheLanguage(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp relay down")[0]
	staff := f.client()
	staff.login("admin@jejak.test")

	type page struct {
		path   string
		id, en []string // page-specific strings in each language
	}
	pages := []page{
		{"/admin",
			[]string{"Ikhtisar antrean", "Per jenis", "Per organisasi", "jatuh tempo sekarang", "Gagal 1 jam", "Jenis dan antrean yang dijeda", "Jadwal"},
			[]string{"Queue overview", "By kind", "By tenant", "due now", "Failed 1h", "Paused kinds and queues", "Schedules"}},
		{"/admin/jobs?state=dead",
			[]string{"<h1>Tugas</h1>", "Status apa saja", "Kunci idempotensi", "Galat terakhir", ">Saring<", ">Waktu dalam<", ">mati<"},
			[]string{"<h1>Jobs</h1>", "Any state", "Idempotency key", "Last error", ">Filter<", ">Times in<", ">dead<"}},
		{fmt.Sprintf("/admin/jobs/%d", dead),
			[]string{"Riwayat percobaan", "Kunci idempotensi", "Surat mati — tindakan operator", "Ulangi sekarang", ">Buang<", "Peristiwa audit terkait"},
			[]string{"Attempt history", "Idempotency key", "Dead letter — operator action", "Retry now", ">Discard<", "Related audit events"}},
		{"/admin/dead",
			[]string{"Per jenis dan kelas kegagalan", "Ulangi semua…", "Buang semua…", "Ulangi atau buang (alasan wajib)", `placeholder="alasan"`, "Kelas apa saja"},
			[]string{"By kind and failure class", "Retry all…", "Discard all…", "Retry or discard (reason required)", `placeholder="reason"`, "Any class"}},
		{"/admin/dead/bulk?action=retry&kind=email.weekly-report",
			[]string{"Ulangi 1 tugas mati yang cocok dengan kind=email.weekly-report", "Ulangi 1", ">Batal<"},
			[]string{"Retry 1 dead job matching kind=email.weekly-report", "Retry 1", ">Cancel<"}},
		{"/admin/outbox",
			[]string{"Pesan yang gagal", "Tidak ada pesan yang gagal.", "Diteruskan per menit, satu jam terakhir", "Terkirim · 1 jam"},
			[]string{"Failed messages", "No failed messages.", "Relayed per minute, last hour", "Delivered · 1 h"}},
		{"/admin/search?trace=0123456789abcdef0123456789abcdef",
			[]string{"<h1>Cari trace</h1>", "Dimulai oleh", "Lini masa", "Tidak ada yang membawa id trace ini."},
			[]string{"<h1>Trace search</h1>", "Started by", "Timeline", "Nothing carries this trace id."}},
		{"/admin/tenants",
			[]string{"Nama atau slug", ">Cari<", "<th>Paket</th>", ">aktif<"},
			[]string{"Name or slug", ">Search<", "<th>Plan</th>", ">active<"}},
		{"/admin/tenants/toko-bunga-melati",
			[]string{"Riwayat paket", "Nonaktifkan akses", "Rekonsiliasi pembayaran sekarang", "Tugas terbaru", ">pemilik<", "Alasan (perlu persetujuan orang kedua)"},
			[]string{"Plan history", "Disable access", "Reconcile payments now", "Recent jobs", ">owner<", "Reason (needs a second person&#39;s approval)"}},
		{"/admin/approvals",
			[]string{"Menunggu keputusan", "Sudah diputuskan", "Tindakan sensitif butuh dua staf"},
			[]string{"Waiting for a decision", "Decided", "Sensitive actions need two staff members"}},
		{"/admin/alerts",
			[]string{"Selesai atau tenang", "Belum ada peringatan yang berubah status.", "Yang harus dilakukan"},
			[]string{"Resolved or quiet", "No alert has changed state yet.", "What to do"}},
	}
	for _, p := range pages {
		for _, lang := range []struct {
			code      string
			want, not []string
		}{{"id", p.id, p.en}, {"en", p.en, p.id}} {
			a := staff.getLang(p.path, lang.code)
			if a.status != http.StatusOK || !strings.Contains(a.body, `<html lang="`+lang.code+`">`) {
				t.Errorf("%s in %s: %d", p.path, lang.code, a.status)
				continue
			}
			for _, w := range lang.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("%s in %s lacks %q", p.path, lang.code, w)
				}
			}
			for _, n := range lang.not {
				if strings.Contains(a.body, n) {
					t.Errorf("%s in %s shows %q (the other language)", p.path, lang.code, n)
				}
			}
		}
	}

	// The filter's values stay codes: the Indonesian page still links and
	// selects state=dead.
	if a := staff.getLang("/admin/jobs?state=dead", "id"); !strings.Contains(a.body, `<option value="dead" selected>mati</option>`) {
		t.Errorf("state filter option not a code with an Indonesian label: %.2000s", a.body)
	}

	// The job and dead-letter filters' messages, values included.
	for _, tc := range []struct {
		path   string
		id, en []string
	}{
		{"/admin/jobs?tenant=nope&trace=" + strings.Repeat("x", 201),
			[]string{"Organisasi tidak dikenal.", "Id trace paling banyak 200 karakter."},
			[]string{"Unknown tenant.", "A trace id is at most 200 characters."}},
		{"/admin/jobs?payload=garbage&queue=" + strings.Repeat("q", 101),
			[]string{"Cari payload sebagai kolom=nilai", "Antrean paling banyak 100 karakter."},
			[]string{"Search the payload as field=value", "A queue is at most 100 characters."}},
		{"/admin/dead?class=bogus&flagged=maybe",
			[]string{"Kelas kegagalan tidak dikenal.", "Pilih ya atau tidak."},
			[]string{"Unknown failure class.", "Choose yes or no."}},
	} {
		for _, lang := range []struct {
			code      string
			want, not []string
		}{{"id", tc.id, tc.en}, {"en", tc.en, tc.id}} {
			a := staff.getLang(tc.path, lang.code)
			if a.status != http.StatusUnprocessableEntity && a.status != http.StatusOK {
				t.Errorf("%s in %s: %d", tc.path, lang.code, a.status)
			}
			for _, w := range lang.want {
				if !strings.Contains(a.body, w) {
					t.Errorf("%s in %s lacks %q", tc.path, lang.code, w)
				}
			}
			for _, n := range lang.not {
				if strings.Contains(a.body, n) {
					t.Errorf("%s in %s shows %q (the other language)", tc.path, lang.code, n)
				}
			}
		}
	}

	// Flash messages after an action follow the language too.
	a := staff.postLang(fmt.Sprintf("/admin/jobs/%d/retry", dead), staff.withCSRF(url.Values{"reason": {"relai diperbaiki"}, "confirm": {"permanent"}}), "id")
	if a.status != http.StatusSeeOther {
		t.Fatalf("retry: %d %.300s", a.status, a.body)
	}
	if b := staff.getLang(a.location, "id"); !strings.Contains(b.body, fmt.Sprintf("Tugas #%d diulang: kembali menunggu", dead)) {
		t.Errorf("retry flash not in Indonesian: %.3000s", b.body)
	}
	// A refused action's message (a domain validation message) too.
	if a := staff.postLang(fmt.Sprintf("/admin/jobs/%d/discard", dead), staff.withCSRF(url.Values{"reason": {" "}}), "id"); a.status == http.StatusUnprocessableEntity &&
		strings.Contains(a.body, "Give a reason") {
		t.Errorf("refused discard shows the English message: %.2000s", a.body)
	}

	// Tenant pages: billing's invoice badges, the webhook flash and the
	// endpoint's disabled reason, the audit export's filter error.
	owner := f.client()
	owner.login("budi@melati.test")
	if a := owner.postLang("/t/toko-bunga-melati/webhooks", owner.withCSRF(url.Values{"url": {"https://example.com/hook"}, "events": {"*"}}), "id"); a.status != http.StatusOK {
		t.Fatalf("create webhook: %d %.300s", a.status, a.body)
	}
	var ep int64
	if err := f.db.Admin.QueryRow(t.Context(), `SELECT max(id) FROM webhook_endpoints`).Scan(&ep); err != nil {
		t.Fatal(err)
	}
	// The secret rotation's overlap is a duration in words, not "24h0m0s".
	for lang, want := range map[string]string{"id": "tetap menandatangani selama 24 jam.", "en": "keeps signing for 24 hours."} {
		r := owner.postLang(fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d/rotate", ep), owner.withCSRF(nil), lang)
		if r.status != http.StatusOK || !strings.Contains(r.body, want) || strings.Contains(r.body, "24h0m0s") {
			t.Errorf("rotate in %s: %d, want %q: %.1500s", lang, r.status, want, r.body)
		}
	}
	a = owner.postLang(fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d/disable", ep), owner.withCSRF(nil), "id")
	if a.status != http.StatusSeeOther {
		t.Fatalf("disable: %d", a.status)
	}
	wp := owner.getLang(a.location, "id")
	for _, w := range []string{"Endpoint dinonaktifkan: tidak menerima apa pun sampai diaktifkan lagi.", "dinonaktifkan oleh pemilik", "* atau project.created,project.deleted"} {
		if !strings.Contains(wp.body, w) {
			t.Errorf("webhooks page in Indonesian lacks %q", w)
		}
	}
	if strings.Contains(wp.body, "disabled by the owner") {
		t.Error("webhooks page shows the English disabled reason")
	}
	if a := owner.getLang("/t/toko-bunga-melati/audit/export.csv?from=kemarin", "id"); a.status != http.StatusUnprocessableEntity ||
		!strings.Contains(a.body, "Saringan ekspor tidak valid: from: ") || strings.Contains(a.body, "The export filter is not valid") {
		t.Errorf("export filter error in Indonesian: %d %.1500s", a.status, a.body)
	}
	if a := owner.getLang("/t/toko-bunga-melati/billing", "en"); a.status != http.StatusOK {
		t.Errorf("billing: %d", a.status)
	}
}
