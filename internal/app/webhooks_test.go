package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook"
)

// TestWebhookEngineClaimsATenantsPlacesOnly: the delivery engine claims no
// more of one tenant's deliveries than JEJAK_WEBHOOK_TENANT_CONCURRENCY,
// so a busy tenant's backlog does not fill every worker with jobs the
// Deliverer would only put back.
func TestWebhookEngineClaimsATenantsPlacesOnly(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := insertTenant(t, db, "melati", "Melati")
	cfg, err := FromEnv(func(k string) string {
		return map[string]string{"JEJAK_WEBHOOK_WORKERS": "8", "JEJAK_WEBHOOK_TENANT_CONCURRENCY": "3"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := newWebhookEngine(cfg, &Env{System: db.System}, clock.Database{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		job.NopObserver{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]job.EnqueueParams, 8)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenant, Kind: webhook.Kind, Queue: webhook.Queue, Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := wh.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	jobs, err := wh.Claim(ctx, "w", 8)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claimed %d of the tenant's 8 deliveries (%v), want its 3 places", len(jobs), err)
	}
}
