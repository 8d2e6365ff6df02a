package outboxconsole_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/testdb"
)

type refuse struct{}

func (refuse) Publish(_ context.Context, msgs []outbox.Envelope) []error {
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = errors.New("nats: no responders")
	}
	return errs
}

func TestStatusAndAuditedRetry(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	clk := clock.NewFrozen(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	tenants := map[string]int64{}
	for _, s := range []string{"toko", "kopi"} {
		var id int64
		if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", s).Scan(&id); err != nil {
			t.Fatal(err)
		}
		tenants[s] = id
		err := database.InTenantTx(ctx, db.App, id, func(tx pgx.Tx) error {
			for _, agg := range []string{"1", "2"} {
				if _, err := outbox.NewWriter(clk).Publish(ctx, tx, id, outbox.Message{Type: "project.created", AggregateType: "project", AggregateID: agg}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := outboxconsole.New(db.System, clk)
	clk.Advance(3 * time.Minute)
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 4 || st.Failed != 0 || st.OldestPendingAge != 3*time.Minute || !st.Late() || len(st.Minutes) != 60 {
		t.Fatalf("status = %+v", st)
	}
	r, _ := outbox.NewRelay(outbox.RelayConfig{Pool: db.System, Sink: refuse{}, Clock: clk, MaxAttempts: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = c.Status(ctx)
	if st.Failed != 4 || st.Pending != 0 || st.Late() || st.Minutes[59].Failed != 4 {
		t.Fatalf("after failures: %+v", st)
	}
	failed, err := c.Failed(ctx, "kopi", 10)
	if err != nil || len(failed) != 2 || failed[0].TenantSlug != "kopi" || failed[0].LastError != "nats: no responders" {
		t.Fatalf("failed = %+v, %v", failed, err)
	}
	if _, err := c.Retry(ctx, outboxconsole.Operator{Via: "cli"}, "  ", "", 0); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("retry without reason: %v", err)
	}
	if _, err := c.Retry(ctx, outboxconsole.Operator{Via: "cli"}, "broker back", "nope", 0); !errors.Is(err, outboxconsole.ErrTenantNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	n, err := c.Retry(ctx, outboxconsole.Operator{Via: "cli"}, "broker back", "kopi", 0)
	if err != nil || n != 2 {
		t.Fatalf("retry kopi: %d %v", n, err)
	}
	st, _ = c.Status(ctx)
	if st.Failed != 2 || st.Pending != 2 {
		t.Fatalf("after retry: %+v", st)
	}
	var kopiEvents, tokoEvents int
	_ = db.Admin.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'outbox.retry' AND detail->>'reason' = 'broker back'", tenants["kopi"]).Scan(&kopiEvents)
	_ = db.Admin.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'outbox.retry'", tenants["toko"]).Scan(&tokoEvents)
	if kopiEvents != 1 || tokoEvents != 0 {
		t.Fatalf("audit: kopi %d, toko %d", kopiEvents, tokoEvents)
	}
}

// OtherReplicas counts engines other than ours that heartbeated within a
// minute: what the embedded-NATS warning at start relies on.
func TestOtherReplicasSeesRecentHeartbeats(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Admin.Exec(ctx, `INSERT INTO job_workers (worker_id, started_at, last_heartbeat) VALUES
		('me', now(), now()), ('replica-b', now(), now() - interval '10 seconds'), ('gone', now(), now() - interval '10 minutes')`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := outboxconsole.New(db.System, nil).OtherReplicas(ctx, "me")
	if err != nil || n != 1 {
		t.Fatalf("other replicas = %d, %v; want 1", n, err)
	}
}
