// Package outboxconsole is the staff view and repair of the outbox: counts
// by state without unbounded scans, lag, throughput over the last hour,
// failed messages and their retry (reason required, recorded in each
// affected tenant's audit trail). The relay itself lives in
// internal/outbox; this package only looks at and repairs its table.
package outboxconsole

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/database"
)

// CountCap is where the page stops counting: "10000+" costs the same as 10.
const CountCap = 10000

// LagAlert is the pending age above which the outbox is late.
const LagAlert = 2 * time.Minute

// MaxRetry caps one retry action.
const MaxRetry = 10000

// ErrTenantNotFound: the --tenant slug names no tenant.
var ErrTenantNotFound = apperr.NotFound("tenant not found")

// Console reads and repairs the outbox through the cross-tenant pool.
type Console struct {
	system database.Pool
	clk    clock.Clock
	audit  *audit.Recorder
}

// New returns a Console over the jejak_system pool.
func New(system database.Pool, clk clock.Clock) *Console {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Console{system: system, clk: clk, audit: audit.NewRecorder(clk)}
}

// Minute is one minute of relay throughput.
type Minute struct {
	At        time.Time
	Delivered int64
	Failed    int64
}

// Status is the outbox at a glance.
type Status struct {
	Pending, Processing, Failed int64 // each at most CountCap
	OldestPendingAge            time.Duration
	Now                         time.Time
	Minutes                     []Minute // the last hour, oldest first, every minute present
}

// Late reports whether pending messages wait longer than LagAlert.
func (s *Status) Late() bool { return s.OldestPendingAge > LagAlert }

// DeliveredLastHour sums the chart.
func (s *Status) DeliveredLastHour() int64 {
	var n int64
	for _, m := range s.Minutes {
		n += m.Delivered
	}
	return n
}

// Status reads the counts, lag and last hour's throughput.
func (c *Console) Status(ctx context.Context) (*Status, error) {
	r, err := storeCounts(ctx, c.system, c.clk.Now())
	if err != nil {
		return nil, fmt.Errorf("outbox counts: %w", err)
	}
	s := &Status{Pending: r.pending, Processing: r.processing, Failed: r.failed, Now: r.now,
		OldestPendingAge: max(r.now.Sub(r.oldestPending), 0)}
	end := r.now.UTC().Truncate(time.Minute)
	start := end.Add(-59 * time.Minute)
	byMin, err := storeMinutesSince(ctx, c.system, start)
	if err != nil {
		return nil, fmt.Errorf("outbox throughput: %w", err)
	}
	for m := start; !m.After(end); m = m.Add(time.Minute) {
		row := byMin[m]
		s.Minutes = append(s.Minutes, Minute{At: m, Delivered: row.Delivered, Failed: row.Failed})
	}
	return s, nil
}

// FailedMessage is a message that used its attempts.
type FailedMessage struct {
	ID            int64
	TenantID      int64
	TenantSlug    string
	Type          string
	AggregateType string
	AggregateID   string
	Attempts      int
	LastError     string
	CreatedAt     time.Time
}

// Failed lists failed messages, newest first; tenantSlug "" = all tenants.
func (c *Console) Failed(ctx context.Context, tenantSlug string, limit int) ([]FailedMessage, error) {
	tid, err := storeTenant(ctx, c.system, tenantSlug)
	if err != nil {
		return nil, err
	}
	out, err := storeFailed(ctx, c.system, tid, min(max(limit, 1), 500))
	if err != nil {
		return nil, fmt.Errorf("failed outbox messages: %w", err)
	}
	return out, nil
}

// Page is what the staff outbox page shows at once.
type Page struct {
	Status    *Status
	Failed    []FailedMessage   // of the tenant asked for, or of all
	Endpoints []FailingEndpoint // of every tenant
}

// Page reads the status, up to failed failed messages of tenantSlug ("" =
// all tenants) and up to endpoints failing webhook endpoints.
func (c *Console) Page(ctx context.Context, tenantSlug string, failed, endpoints int) (*Page, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	p := &Page{Status: st}
	if p.Failed, err = c.Failed(ctx, tenantSlug, failed); err != nil {
		return nil, err
	}
	if p.Endpoints, err = c.FailingEndpoints(ctx, endpoints); err != nil {
		return nil, err
	}
	return p, nil
}

// Operator is who retries: a staff member at the dashboard, or an
// operator at a shell (recorded as the system, with how it was done).
type Operator struct {
	StaffUserID int64 // 0 = shell operator (system actor)
	TraceID     string
	Via         string // "dashboard" or "cli"
}

// Retry returns failed messages to pending with a fresh attempt budget:
// one message (id > 0), or all of one tenant (slug), or all. Each affected
// tenant's trail records who did it, why and which messages, in the same
// transaction. It returns how many messages it retried.
func (c *Console) Retry(ctx context.Context, op Operator, reason, tenantSlug string, id int64) (int, error) {
	reason, err := console.CheckReason(reason)
	if err != nil {
		return 0, err
	}
	n := 0
	err = database.InTx(ctx, c.system, func(tx pgx.Tx) error {
		tid, err := storeTenant(ctx, tx, tenantSlug)
		if err != nil {
			return err
		}
		var idp *int64
		if id > 0 {
			idp = &id
		}
		rows, err := storeRetry(ctx, tx, c.clk.Now(), tid, idp, MaxRetry)
		if err != nil {
			return fmt.Errorf("retry failed outbox messages: %w", err)
		}
		n = len(rows)
		if id > 0 && n == 0 {
			return apperr.NotFound("no failed outbox message with that id")
		}
		byTenant := map[int64][]int64{}
		for _, r := range rows {
			byTenant[r.tenantID] = append(byTenant[r.tenantID], r.id)
		}
		tenants := make([]int64, 0, len(byTenant))
		for t := range byTenant {
			tenants = append(tenants, t)
		}
		sort.Slice(tenants, func(i, j int) bool { return tenants[i] < tenants[j] })
		for _, t := range tenants { // tenant order: the audit heads' lock order
			ids := byTenant[t]
			shown := ids[:min(len(ids), 100)]
			detail, _ := json.Marshal(map[string]any{"reason": reason, "messages": len(ids), "ids": shown, "via": op.Via})
			ev := audit.Event{TenantID: t, ActorKind: audit.ActorSystem, Action: "outbox.retry", Entity: "outbox",
				EntityID: "failed", Detail: detail, TraceID: op.TraceID}
			if len(ids) == 1 {
				ev.EntityID = strconv.FormatInt(ids[0], 10)
			}
			if op.StaffUserID > 0 {
				uid := op.StaffUserID
				ev.ActorKind, ev.ActorID = audit.ActorStaff, &uid
			}
			if err := c.audit.Append(ctx, tx, ev); err != nil {
				return fmt.Errorf("audit outbox retry: %w", err)
			}
		}
		if n > 0 {
			// Wake the relays; polling would find the messages anyway.
			if _, err := tx.Exec(ctx, "SELECT pg_notify('jejak_outbox', '')"); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// OtherReplicas counts other job engines that heartbeated in the last
// minute: replicas sharing this database.
func (c *Console) OtherReplicas(ctx context.Context, workerID string) (int64, error) {
	return storeOtherReplicas(ctx, c.system, workerID, c.clk.Now())
}

// FailingEndpoint is a tenant's webhook endpoint whose last attempt failed.
type FailingEndpoint struct {
	ID                  int64
	TenantSlug          string
	URL                 string
	Enabled             bool
	DisabledReason      string
	ConsecutiveFailures int
	FailingSince        *time.Time
	// BreakerOpen: its deliveries are held until BreakerOpenUntil.
	BreakerOpen      bool
	BreakerOpenUntil *time.Time
}

// FailingEndpoints lists the webhook endpoints of every tenant whose last
// attempt failed, the longest failure runs first, with their breakers.
func (c *Console) FailingEndpoints(ctx context.Context, limit int) ([]FailingEndpoint, error) {
	eps, err := storeFailingEndpoints(ctx, c.system, c.clk.Now(), min(max(limit, 1), 200))
	if err != nil {
		return nil, fmt.Errorf("failing webhook endpoints: %w", err)
	}
	return eps, nil
}
