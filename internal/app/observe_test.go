package app

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestAuditGauges: the scrape reports the events waiting for the sealer
// and, apart from them, the sealed events the name search's index does
// not cover yet.
func TestAuditGauges(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := insertTenant(t, db, "melati", "Melati")
	insertUnsealed(t, db, tenant, 3)
	// Two of the three sealed, none indexed.
	if res, err := audit.NewSealer(db.System, audit.SealerOptions{Batch: 2}).SealOnce(ctx, false); err != nil || res.Sealed != 2 {
		t.Fatalf("seal: %+v, %v", res, err)
	}
	families, err := NewMetrics(&Env{App: db.App, System: db.System}).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetType() == dto.MetricType_GAUGE {
				got[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{"jejak_audit_unsealed_events": 1, "jejak_audit_unindexed_events": 2} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
