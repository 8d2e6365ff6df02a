package audit_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestTimelineMembershipCheckCost measures the tenant timeline (first page,
// 50 rows) with the jejak_app policies as they were (tenant only) and as
// they are (tenant and live membership, an InitPlan), interleaved A B A B
// in one run on one seeded database, through EXPLAIN ANALYZE and through
// audit.Timeline. Indicative only (shared machine); docs/benchmarks.md
// records a run. JEJAK_RLS_BENCH=<events> enables it.
func TestTimelineMembershipCheckCost(t *testing.T) {
	events, _ := strconv.Atoi(os.Getenv("JEJAK_RLS_BENCH"))
	if events <= 0 {
		t.Skip("set JEJAK_RLS_BENCH=<events> to measure")
	}
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	member := f.user(t, "budi@example.com", tn)
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn}, events, audit.SeedOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Admin.Exec(ctx, "VACUUM ANALYZE audit_sealed, audit_unsealed"); err != nil {
		t.Fatal(err)
	}
	policies := map[string]string{
		"tenant only": "tenant_id = app_tenant_id()",
		"membership":  "(tenant_id = app_tenant_id()) AND (SELECT app_is_member())",
	}
	set := func(mode string) {
		if _, err := f.db.Admin.Exec(ctx, "ALTER POLICY tenant_isolation ON audit_events USING ("+policies[mode]+")"); err != nil {
			t.Fatal(err)
		}
	}
	defer set("membership")
	explain := func() (float64, string) {
		var plan []string
		err := database.InTenantUserTx(ctx, f.db.App, tn, member, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM audit_events
				WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 51`, tn)
			if err != nil {
				return err
			}
			plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var ms float64
		for _, l := range plan {
			if strings.HasPrefix(strings.TrimSpace(l), "Execution Time:") {
				fmt.Sscanf(strings.TrimSpace(l), "Execution Time: %f ms", &ms)
			}
		}
		return ms, strings.Join(plan, "\n")
	}
	timeline := func() float64 {
		began := time.Now()
		err := database.InTenantUserTx(ctx, f.db.App, tn, member, func(tx pgx.Tx) error {
			p, err := audit.Timeline(ctx, tx, tn, audit.Filter{}, 0, 50)
			if err == nil && len(p.Rows) != 50 {
				err = fmt.Errorf("%d events", len(p.Rows))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return float64(time.Since(began).Microseconds()) / 1000
	}
	res := map[string]map[string][]float64{}
	plans := map[string]string{}
	for round := 0; round < 6; round++ {
		for _, mode := range []string{"tenant only", "membership"} {
			set(mode)
			if res[mode] == nil {
				res[mode] = map[string][]float64{}
			}
			for i := 0; i < 50; i++ {
				ms, plan := explain()
				res[mode]["explain"] = append(res[mode]["explain"], ms)
				plans[mode] = plan
				res[mode]["timeline"] = append(res[mode]["timeline"], timeline())
			}
		}
	}
	for _, mode := range []string{"tenant only", "membership"} {
		for _, what := range []string{"explain", "timeline"} {
			v := res[mode][what]
			sort.Float64s(v)
			t.Logf("RLS %-11s %-8s events=%d n=%d p50_ms=%.3f p95_ms=%.3f min=%.3f max=%.3f", mode, what, events, len(v),
				v[len(v)/2], v[len(v)*95/100], v[0], v[len(v)-1])
		}
		t.Logf("plan (%s):\n%s", mode, plans[mode])
	}
}
