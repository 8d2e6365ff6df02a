package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/testdb"
)

type registry map[string]struct {
	h    job.Handler
	opts kinds.KindOptions
}

func (r registry) Register(kind string, h job.Handler, opts kinds.KindOptions) {
	r[kind] = struct {
		h    job.Handler
		opts kinds.KindOptions
	}{h, opts}
}

// Every shipped kind is registered with its options and its handler works
// end to end with the default dependencies (dev mail sink, given clock).
func TestRegisterWiresEveryShippedKind(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	r := registry{}
	kinds.Register(r, kinds.Deps{App: db.App, System: db.System, Clock: clock.NewFrozen(now)})

	payloads := map[string]string{
		kinds.EmailWeeklyReport: fmt.Sprintf(`{"tenant_id":%d,"to":["ops@example.com"]}`, tenant),
		kinds.SubscriptionSweep: fmt.Sprintf(`{"tenant_id":%d}`, tenant),
		kinds.PointsAward:       fmt.Sprintf(`{"tenant_id":%d,"message_id":"m1","customer":"c1","points":5}`, tenant),
	}
	// A sensitive kind without its approval is refused as a policy
	// failure: registered, wired, and guarded.
	if reg, ok := r[kinds.DisableAccess]; !ok || !reg.opts.Sensitive {
		t.Fatalf("%s not registered as sensitive", kinds.DisableAccess)
	} else {
		p := fmt.Sprintf(`{"tenant_id":%d,"user_id":1,"approval_id":99,"scope":"tenant"}`, tenant)
		j := &job.Job{ID: 2, TenantID: tenant, Kind: kinds.DisableAccess, Payload: json.RawMessage(p), Attempt: 1}
		if err := reg.h(ctx, j); job.ClassOf(err) != job.ClassPolicy {
			t.Fatalf("%s without approval: %v", kinds.DisableAccess, err)
		}
		delete(r, kinds.DisableAccess)
	}
	if len(r) != len(payloads) {
		t.Fatalf("registered %d kinds, want %d", len(r), len(payloads))
	}
	for kind, p := range payloads {
		reg, ok := r[kind]
		if !ok {
			t.Errorf("%s not registered", kind)
			continue
		}
		if reg.opts != kinds.Options[kind] || reg.opts.MaxAttempts == 0 {
			t.Errorf("%s registered with %+v", kind, reg.opts)
		}
		j := &job.Job{ID: 1, TenantID: tenant, Kind: kind, Payload: json.RawMessage(p), Attempt: 1}
		if err := reg.h(ctx, j); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
	var mails, awards int
	if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM mail_messages), (SELECT count(*) FROM points_ledger)`).Scan(&mails, &awards); err != nil {
		t.Fatal(err)
	}
	if mails != 1 || awards != 1 {
		t.Fatalf("mail_messages %d, points_ledger %d; want 1 and 1", mails, awards)
	}
	// What the workers did is in the tenant's trail, by the system.
	var work int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND actor_kind = 'system'
		AND action IN ('points.awarded', 'report.sent')`, tenant).Scan(&work); err != nil {
		t.Fatal(err)
	}
	if work != 2 {
		t.Fatalf("worker events in the trail: %d, want 2 (points.awarded, report.sent)", work)
	}
}

func TestRegisterRequiresAppPool(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("Register without an app pool did not panic")
		}
	}()
	kinds.Register(registry{}, kinds.Deps{})
}
