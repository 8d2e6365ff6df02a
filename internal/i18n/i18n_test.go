package i18n

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestCatalogsHaveTheSameKeys fails when a key exists in one language and
// not the other, or a translation is empty.
func TestCatalogsHaveTheSameKeys(t *testing.T) {
	cats := Catalogs()
	for a, ma := range cats {
		for b, mb := range cats {
			var missing []string
			for k := range ma {
				if strings.HasSuffix(k, PluralSuffix) && !HasSingular(b) {
					continue // a language without singular forms has none
				}
				if _, ok := mb[k]; !ok {
					missing = append(missing, k)
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("keys in %s but not in %s: %q", a, b, missing)
			}
		}
		for k, v := range ma {
			if strings.TrimSpace(v) == "" {
				t.Errorf("%s: empty translation of %q", a, k)
			}
		}
	}
}

// TestPlaceholdersMatch: a translation uses the same verbs as English, so
// no argument goes missing or prints as %!s(MISSING).
func TestPlaceholdersMatch(t *testing.T) {
	verb := regexp.MustCompile(`%(\[\d+\])?[sdv]`)
	norm := func(s string) []string {
		v := verb.FindAllString(s, -1)
		sort.Strings(v)
		return v
	}
	for k, e := range en {
		if strings.HasSuffix(k, PluralSuffix) {
			// Indonesian has no singular forms; the form with the
			// count is checked instead.
			continue
		}
		if got, want := norm(id[k]), norm(e); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%q: id uses %v, en %v", k, got, want)
		}
	}
}

// TestViewsUseKnownKeys: every literal key that views and the web package
// pass to T exists in the catalogs (a typo would print the raw key).
func TestViewsUseKnownKeys(t *testing.T) {
	call := regexp.MustCompile(`i18n\.(?:T|Plural|Count)\(ctx, "([a-z_]+\.[a-z_.-]+)"`)
	var files []string
	for _, dir := range []string{"../../views", "../web"} {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && (strings.HasSuffix(p, ".templ") || (strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_templ.go"))) {
				files = append(files, p)
			}
			return nil
		})
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !Has(m[1]) {
				t.Errorf("%s uses unknown key %q", f, m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d translated strings in views; is the pattern stale?", seen)
	}
}

func TestLanguageChoiceAndFormats(t *testing.T) {
	for header, want := range map[string]string{
		"": EN, "id": ID, "id-ID,id;q=0.9,en;q=0.5": ID, "en-US,en;q=0.9": EN, "fr": EN, "fr, id;q=0.5": ID, "garbage;;": EN,
	} {
		if got := FromAcceptLanguage(header); got != want {
			t.Errorf("Accept-Language %q → %s, want %s", header, got, want)
		}
	}
	ctx := WithLang(context.Background(), ID)
	if got := T(ctx, "event.project.delete", "Rina Wulandari", "“Katalog Musim Hujan”"); got != "Rina Wulandari menghapus proyek “Katalog Musim Hujan”" {
		t.Errorf("id sentence: %q", got)
	}
	if got := In(EN, "event.project.delete", "Rina Wulandari", "“Katalog Musim Hujan”"); got != "Rina Wulandari deleted project “Katalog Musim Hujan”" {
		t.Errorf("en sentence: %q", got)
	}
	if got := Number(ctx, 1234567); got != "1.234.567" {
		t.Errorf("id number: %q", got)
	}
	if got := Number(context.Background(), 1234567); got != "1,234,567" {
		t.Errorf("en number: %q", got)
	}
	jkt, _ := time.LoadLocation("Asia/Jakarta")
	now := time.Date(2026, 11, 12, 9, 0, 0, 0, jkt)
	for _, tc := range []struct {
		lang string
		t    time.Time
		want string
	}{
		{ID, now.Add(-time.Hour), "Hari ini"},
		{EN, now.Add(-time.Hour), "Today"},
		{ID, now.Add(-20 * time.Hour), "Kemarin"},
		{EN, now.Add(-20 * time.Hour), "Yesterday"},
		{EN, time.Date(2026, 11, 10, 23, 0, 0, 0, jkt), "Tue 10 Nov"},
		{ID, time.Date(2026, 11, 10, 23, 0, 0, 0, jkt), "Sel 10 Nov"},
		{ID, time.Date(2025, 8, 17, 10, 0, 0, 0, jkt), "Min 17 Agu 2025"},
	} {
		if got := DayLabel(tc.lang, tc.t, now, jkt); got != tc.want {
			t.Errorf("DayLabel(%s, %s) = %q, want %q", tc.lang, tc.t, got, tc.want)
		}
	}
	// Dates on tenant and staff pages name the month in the reader's language.
	if got, want := Date(ID, time.Date(2025, 8, 17, 10, 0, 0, 0, jkt)), "17 Agu 2025"; got != want {
		t.Errorf("id date: %q, want %q", got, want)
	}
	if got, want := Date(EN, time.Date(2025, 8, 17, 10, 0, 0, 0, jkt)), "17 Aug 2025"; got != want {
		t.Errorf("en date: %q, want %q", got, want)
	}
	if got := Relative(ID, now.Add(-5*time.Minute), now); got != "5 menit lalu" {
		t.Errorf("relative: %q", got)
	}
	if Unknown := In(ID, "Some untranslated domain message."); Unknown != "Some untranslated domain message." {
		t.Errorf("unknown key: %q", Unknown)
	}
}

// TestDurationInWords: overlaps and alert windows read as words in the
// reader's language, never as Go's "24h0m0s".
func TestDurationInWords(t *testing.T) {
	for _, tc := range []struct {
		lang string
		d    time.Duration
		want string
	}{
		{ID, 24 * time.Hour, "24 jam"},
		{EN, 24 * time.Hour, "24 hours"},
		{EN, time.Hour, "1 hour"},
		{ID, 90 * time.Minute, "1 jam 30 menit"},
		{EN, 90 * time.Minute, "1 hour 30 minutes"},
		{EN, 5 * time.Minute, "5 minutes"},
		{ID, 14 * 24 * time.Hour, "14 hari"},
		{EN, 0, "0 seconds"},
		{ID, 1500 * time.Millisecond, "1 detik"},
	} {
		if got := DurationIn(tc.lang, tc.d); got != tc.want {
			t.Errorf("DurationIn(%s, %s) = %q, want %q", tc.lang, tc.d, got, tc.want)
		}
	}
}

// TestDecimalFollowsTheLanguage: measured values (alert values and
// thresholds) use the reader's decimal separator.
func TestDecimalFollowsTheLanguage(t *testing.T) {
	id := WithLang(context.Background(), "id")
	en := WithLang(context.Background(), "en")
	for _, c := range []struct {
		v      float64
		id, en string
	}{{0.25, "0,25", "0.25"}, {12.5, "12,5", "12.5"}, {120, "120", "120"}} {
		if got := Decimal(id, c.v); got != c.id {
			t.Errorf("id %v = %q, want %q", c.v, got, c.id)
		}
		if got := Decimal(en, c.v); got != c.en {
			t.Errorf("en %v = %q, want %q", c.v, got, c.en)
		}
	}
}

// TestPluralFollowsEachLanguage: English takes the singular form for
// exactly one, Indonesian never inflects; every singular form has its
// plural key beside it.
func TestPluralFollowsEachLanguage(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		lang string
		days int
		want string
	}{
		{EN, 1, "1 day ago"}, {EN, 2, "2 days ago"}, {EN, 21, "21 days ago"},
		{ID, 1, "1 hari lalu"}, {ID, 3, "3 hari lalu"},
	} {
		if got := Relative(tc.lang, now.AddDate(0, 0, -tc.days), now); got != tc.want {
			t.Errorf("%s, %d days: %q, want %q", tc.lang, tc.days, got, tc.want)
		}
	}
	ctx := WithLang(context.Background(), EN)
	if got := Count(ctx, "schedule.result.tenants", 1); got != "1 tenant" {
		t.Errorf("one tenant: %q", got)
	}
	if got := Plural(ctx, "alerts.delivery_ended", 1, "dead", 1, "HTTP 500"); got != "dead after 1 attempt (HTTP 500)" {
		t.Errorf("one attempt: %q", got)
	}
	if got := Count(ctx, "schedule.result.tenants", 3); got != "3 tenants" {
		t.Errorf("three tenants: %q", got)
	}
	for k := range en {
		if base, ok := strings.CutSuffix(k, PluralSuffix); ok {
			if _, has := en[base]; !has {
				t.Errorf("%s has no plural form %s", k, base)
			}
		}
	}
}
