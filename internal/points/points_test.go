package points_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/points"
	"github.com/jejakhq/jejak/internal/testdb"
)

var t0 = time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC)

func newTenant(t *testing.T, db *testdb.DB, slug string) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(),
		`INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id); err != nil {
		t.Fatalf("create tenant %s: %v", slug, err)
	}
	return id
}

func awardJob(id, tenantID int64, payload any) *job.Job {
	raw, _ := json.Marshal(payload)
	by := int64(awardRequester)
	return &job.Job{ID: id, TenantID: tenantID, Kind: points.Kind, Payload: raw, Attempt: 1, MaxAttempts: 3, RequestedBy: &by}
}

// awardRequester is the user every test award job is requested by.
const awardRequester = 42

func award(tenantID int64, msg, customer string, pts int64) map[string]any {
	return map[string]any{"tenant_id": tenantID, "message_id": msg, "customer": customer, "points": pts, "reason": "order"}
}

// snapshot is every row of the three tables points.award writes, as text,
// read past row-level security so nothing can hide.
func snapshot(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT 'ledger ' || row_to_json(l)::text FROM points_ledger l ORDER BY tenant_id, id`,
		`SELECT 'balance ' || row_to_json(b)::text FROM points_balances b ORDER BY tenant_id, customer`,
		`SELECT 'dedup ' || row_to_json(p)::text FROM processed_messages p ORDER BY tenant_id, consumer, message_id`,
	} {
		rows, err := db.Admin.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		s, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		out = append(out, s...)
	}
	return out
}

func balance(t *testing.T, db *testdb.DB, tenantID int64, customer string) int64 {
	t.Helper()
	var b points.Balance
	err := database.InTenantTx(context.Background(), db.App, tenantID, func(tx pgx.Tx) error {
		var err error
		b, err = points.GetBalance(context.Background(), tx, tenantID, customer)
		return err
	})
	if errors.Is(err, points.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("balance: %v", err)
	}
	return b.Balance
}

func newHandler(db *testdb.DB) *points.Handler {
	return &points.Handler{App: db.App, Service: points.NewService(clock.NewFrozen(t0))}
}

func TestAwardRunTwice(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	h := newHandler(db)

	j := awardJob(1, tenant, award(tenant, "msg-9001", "budi@example.com", 50))
	if err := h.Handle(ctx, j); err != nil {
		t.Fatalf("first run: %v", err)
	}
	first := snapshot(t, db)
	if len(first) != 3 {
		t.Fatalf("after first run want 1 ledger + 1 balance + 1 dedup row, got %q", first)
	}
	if err := h.Handle(ctx, j); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if second := snapshot(t, db); !slices.Equal(first, second) {
		t.Fatalf("state changed on the second run:\nfirst  %q\nsecond %q", first, second)
	}
	if got := balance(t, db, tenant, "budi@example.com"); got != 50 {
		t.Fatalf("balance after duplicate delivery = %d, want 50", got)
	}

	// A different message still processes.
	if err := h.Handle(ctx, awardJob(2, tenant, award(tenant, "msg-9002", "budi@example.com", 25))); err != nil {
		t.Fatalf("different message: %v", err)
	}
	if got := balance(t, db, tenant, "budi@example.com"); got != 75 {
		t.Fatalf("balance after a second message = %d, want 75", got)
	}
	if got := len(snapshot(t, db)); got != 5 {
		t.Fatalf("want 2 ledger + 1 balance + 2 dedup rows, got %d", got)
	}
}

func TestAwardConcurrentDoubleDelivery(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	h := newHandler(db)

	for round := range 5 {
		msg := fmt.Sprintf("msg-%d", round)
		j := awardJob(int64(round+1), tenant, award(tenant, msg, "siti@example.com", 10))
		start := make(chan struct{})
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				<-start
				errs <- h.Handle(ctx, j)
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if got := balance(t, db, tenant, "siti@example.com"); got != 50 {
		t.Fatalf("balance = %d after 5 doubly delivered awards of 10, want 50", got)
	}
	var ledger int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM points_ledger`).Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	if ledger != 5 {
		t.Fatalf("ledger rows = %d, want 5", ledger)
	}
}

func TestAwardRejectsBadPayload(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	other := newTenant(t, db, "other")
	h := newHandler(db)

	raw := func(s string) *job.Job {
		return &job.Job{ID: 1, TenantID: tenant, Kind: points.Kind, Payload: json.RawMessage(s)}
	}
	withField := func(k string, v any) *job.Job {
		p := award(tenant, "m1", "c", 5)
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
		return awardJob(1, tenant, p)
	}
	cases := []struct {
		name  string
		job   *job.Job
		class job.Class
	}{
		{"not json", raw(`{"tenant_id":`), job.ClassPermanent},
		{"empty", raw(``), job.ClassPermanent},
		{"array", raw(`[1]`), job.ClassPermanent},
		{"trailing data", raw(fmt.Sprintf(`{"tenant_id":%d,"message_id":"m","customer":"c","points":1} {}`, tenant)), job.ClassPermanent},
		{"unknown field", withField("pointz", 5), job.ClassPermanent},
		{"missing tenant", withField("tenant_id", nil), job.ClassPermanent},
		{"missing message id", withField("message_id", nil), job.ClassPermanent},
		{"blank customer", withField("customer", "  "), job.ClassPermanent},
		{"zero points", withField("points", 0), job.ClassPermanent},
		{"negative points", withField("points", -5), job.ClassPermanent},
		{"too many points", withField("points", points.MaxPoints+1), job.ClassPermanent},
		{"points as string", withField("points", "5"), job.ClassPermanent},
		{"other tenant in payload", withField("tenant_id", other), job.ClassPolicy},
	}
	for _, c := range cases {
		err := h.Handle(ctx, c.job)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if got := job.ClassOf(err); got != c.class {
			t.Errorf("%s: class %s, want %s (%v)", c.name, got, c.class, err)
		}
	}
	if s := snapshot(t, db); len(s) != 0 {
		t.Fatalf("rejected payloads wrote rows: %q", s)
	}
}

func TestAwardStaysInItsTenant(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	a := newTenant(t, db, "tenant-a")
	b := newTenant(t, db, "tenant-b")
	h := newHandler(db)

	// The same message id and customer in two tenants are two stories:
	// dedup is per tenant, and balances never mix.
	if err := h.Handle(ctx, awardJob(1, a, award(a, "msg-1", "budi@example.com", 50))); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(ctx, awardJob(2, b, award(b, "msg-1", "budi@example.com", 7))); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, db, a, "budi@example.com"); got != 50 {
		t.Fatalf("tenant a balance = %d, want 50", got)
	}
	if got := balance(t, db, b, "budi@example.com"); got != 7 {
		t.Fatalf("tenant b balance = %d, want 7", got)
	}

	// Tenant b's transaction cannot read tenant a's ledger.
	err := database.InTenantTx(ctx, db.App, b, func(tx pgx.Tx) error {
		rows, err := points.ListLedger(ctx, tx, a, "budi@example.com")
		if err != nil {
			return err
		}
		if len(rows) != 0 {
			t.Errorf("tenant b read %d ledger rows of tenant a", len(rows))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Even code that passes the wrong tenant id cannot write into another
	// tenant: row-level security refuses the row.
	svc := points.NewService(clock.NewFrozen(t0))
	err = database.InTenantTx(ctx, db.App, b, func(tx pgx.Tx) error {
		_, err := svc.Award(ctx, tx, a, points.Award{MessageID: "sneaky", Customer: "budi@example.com", Points: 1000})
		return err
	})
	if err == nil {
		t.Fatal("award into tenant a from a tenant b transaction succeeded")
	}
	if got := balance(t, db, a, "budi@example.com"); got != 50 {
		t.Fatalf("tenant a balance changed to %d", got)
	}
}

func TestAwardReportsWhetherApplied(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	svc := points.NewService(clock.NewFrozen(t0))
	a := points.Award{MessageID: "evt-1", Customer: "c1", Points: 3}
	for i, want := range []bool{true, false} {
		err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
			got, err := svc.Award(ctx, tx, tenant, a)
			if err == nil && got != want {
				t.Errorf("call %d: applied = %v, want %v", i+1, got, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
		_, err := svc.Award(ctx, tx, tenant, points.Award{MessageID: "evt-2", Customer: "c1", Points: 0})
		return err
	})
	if !errors.Is(err, points.ErrInvalid) {
		t.Fatalf("zero points: %v, want ErrInvalid", err)
	}
}
