package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// TestSealersKeepToTheirShareOfTenants: a sealer given a share of the
// tenants (a replica's, as its job engine's slot) seals and indexes its own
// tenants' events at once and another replica's only once they have
// waited StealAfter; Drain seals everyone's.
func TestSealersKeepToTheirShareOfTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	own, other := f.tenant(t, "milik"), f.tenant(t, "lain")
	rec := audit.NewRecorder(clock.Database{}) // events of now, by the database's clock
	record := func(tid int64) {
		if err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) error {
			_, err := rec.Record(ctx, tx, audit.Event{TenantID: tid, ActorKind: audit.ActorSystem,
				Action: "test.event", Entity: "thing", EntityID: "1"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tid := range []int64{own, other} {
		for range 3 {
			record(tid)
		}
	}
	sealer := func(stealAfter time.Duration) *audit.Sealer {
		return audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer, StealAfter: stealAfter,
			IndexEvery: time.Nanosecond, Slot: func() (int, int) { return 2, int(own % 2) }})
	}
	patient, eager := sealer(time.Hour), sealer(time.Nanosecond)
	indexed := func(tid int64) bool {
		var ok bool
		if err := f.db.Admin.QueryRow(ctx, `SELECT coalesce((SELECT h.size = t.size AND t.size > 0 FROM audit_search_heads h
			JOIN audit_trees t USING (tenant_id) WHERE tenant_id = $1), false)`, tid).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if _, err := patient.SealOnce(ctx, false); err != nil {
		t.Fatal(err)
	}
	if o, n := f.unsealed(t, own), f.unsealed(t, other); o != 0 || n != 3 {
		t.Fatalf("after its pass: %d of its own tenant's events and %d of the other's unsealed, want 0 and 3", o, n)
	}
	if _, err := patient.IndexOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !indexed(own) {
		t.Fatal("its own tenant's sealed events are not indexed")
	}

	// Waited longer than StealAfter: taken.
	if _, err := eager.SealOnce(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := f.unsealed(t, other); n != 0 {
		t.Fatalf("%d of the other replica's tenant's events unsealed after they waited StealAfter", n)
	}
	if _, err := patient.IndexOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if indexed(other) {
		t.Fatal("the other replica's tenant indexed before its events waited StealAfter")
	}
	if _, err := eager.IndexOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !indexed(other) {
		t.Fatal("the other replica's tenant not indexed after its events waited StealAfter")
	}

	// Drain takes everyone's at once.
	record(other)
	if err := patient.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.unsealed(t, other); n != 0 || !indexed(other) {
		t.Fatalf("after Drain: %d unsealed, indexed %v", n, indexed(other))
	}
}
