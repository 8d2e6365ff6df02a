package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// grouped writes n with sep between thousands ("1.234" / "1,234").
func grouped(n int, sep string) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + sep + s[i:]
	}
	return s
}

// TestStaffCountsAreGroupedPerLanguage: with more than a thousand pending
// jobs the overview prints the count as 1.234 in Indonesian and 1,234 in
// English, never as bare digits.
func TestStaffCountsAreGroupedPerLanguage(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	tenant := f.tenantID("toko-bunga-melati")
	ps := make([]job.EnqueueParams, 1234)
	for i := range ps {
		payload, _ := json.Marshal(map[string]int64{"tenant_id": tenant})
		ps[i] = job.EnqueueParams{TenantID: tenant, Kind: "email.weekly-report", Payload: payload, IdempotencyKey: fmt.Sprintf("grouped-%d", i)}
	}
	if err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) error {
		_, err := f.jobs.EnqueueMany(ctx, tx, ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pending := f.count(`SELECT count(*) FROM jobs WHERE state = 'pending'`)
	if pending < 1234 {
		t.Fatalf("pending %d", pending)
	}
	staff := f.client()
	staff.login("support@jejak.test")
	card := regexp.MustCompile(`data-testid="count-pending">([^<]*)<`)
	for lang, sep := range map[string]string{"id": ".", "en": ","} {
		a := staff.getLang("/admin", lang)
		m := card.FindStringSubmatch(a.body)
		if want := grouped(pending, sep); m == nil || m[1] != want {
			t.Errorf("pending in %s: %v, want %q", lang, m, want)
		}
	}
}
