package audit_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
)

// TestSeedScaleBuildsValidChains: generated large data is a valid chain per
// tenant, continues existing chains, and is skewed across tenants.
func TestSeedScaleBuildsValidLogs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	n := 30000
	if s := os.Getenv("JEJAK_AUDIT_SEED_N"); s != "" {
		// Measurement mode: JEJAK_AUDIT_SEED_N=1000000 go test -run SeedScale -v
		n, _ = strconv.Atoi(s)
	}
	tenants := []int64{f.tenant(t, "melati"), f.tenant(t, "senja"), f.tenant(t, "batik"), f.tenant(t, "empat")}
	for _, tn := range tenants[:3] {
		f.user(t, strconv.FormatInt(tn, 10)+"@x.test", tn)
	}
	f.user(t, "support@jejak.test", 0)
	if _, err := f.db.Admin.Exec(ctx, `UPDATE users SET staff_role = 'support' WHERE email = 'support@jejak.test'`); err != nil {
		t.Fatal(err)
	}
	f.recordN(t, tenants[1], 3) // an existing log to continue

	t0 := time.Now()
	done, err := audit.SeedScale(ctx, f.db.System, tenants, n, audit.SeedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(t0)
	t.Logf("seeded %d audit events in %v (%.0f events/s)", done, elapsed, float64(done)/elapsed.Seconds())
	if done != int64(n) {
		t.Fatalf("seeded %d, want %d", done, n)
	}
	t1 := time.Now()
	f.seal(t)
	t.Logf("sealed in %v", time.Since(t1))
	t1 = time.Now()
	results, err := audit.VerifyAll(ctx, f.db.System, f.vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verified in %v", time.Since(t1))
	var total int64
	for _, r := range results {
		if !r.OK {
			t.Errorf("tenant %d: %+v", r.TenantID, r)
		}
		total += r.CheckedThrough
	}
	if total != int64(n)+3 {
		t.Errorf("logs hold %d events, want %d", total, n+3)
	}
	if results[0].CheckedThrough <= results[3].CheckedThrough*2 {
		t.Errorf("no skew: first tenant %d events, last %d", results[0].CheckedThrough, results[3].CheckedThrough)
	}
}
