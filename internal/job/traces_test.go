package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestEnqueueIndexesTraces: every enqueued job is found by its trace
// (job_traces, which the forensics search and the per-principal enqueue
// alert read) with its tenant, time and requester, through Enqueue and
// EnqueueMany alike; a job an idempotency key turned away is not indexed
// again, and a rolled back enqueue indexes nothing.
func TestEnqueueIndexesTraces(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{})
	staff := staffID(t, db)
	p := func(trace, key string) job.EnqueueParams {
		return job.EnqueueParams{TenantID: ten, Kind: "traced", Payload: json.RawMessage(`{}`), TraceID: trace,
			IdempotencyKey: key, RequestedBy: &staff}
	}
	one := enqueueTenant(t, db, e, p("trace-one", "")).ID
	var many []int64
	if err := database.InTenantTx(ctx, db.App, ten, func(tx pgx.Tx) (err error) {
		many, err = e.EnqueueMany(ctx, tx, []job.EnqueueParams{p("trace-a", "k"), p("trace-b", "")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if again := enqueueTenant(t, db, e, p("trace-again", "k")); !again.Existing || again.ID != many[0] {
		t.Fatalf("the repeated key enqueued %+v, want the existing job %d", again, many[0])
	}
	boom := errors.New("caller failed")
	if err := database.InTenantTx(ctx, db.App, ten, func(tx pgx.Tx) error {
		if _, err := e.Enqueue(ctx, tx, p("trace-lost", "")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled back enqueue: %v", err)
	}

	rows, err := db.Admin.Query(ctx, `SELECT t.trace_id, t.job_id FROM job_traces t
		JOIN jobs j ON j.tenant_id = t.tenant_id AND j.id = t.job_id
		WHERE t.tenant_id = $1 AND t.trace_id = j.trace_id AND t.created_at = j.created_at
		  AND t.requested_by IS NOT DISTINCT FROM j.requested_by AND t.requested_by = $2
		ORDER BY t.job_id`, ten, staff)
	if err != nil {
		t.Fatal(err)
	}
	type traced struct {
		Trace string
		ID    int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[traced])
	if err != nil {
		t.Fatal(err)
	}
	var all int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM job_traces WHERE tenant_id = $1`, ten).Scan(&all); err != nil {
		t.Fatal(err)
	}
	want := []traced{{"trace-one", one}, {"trace-a", many[0]}, {"trace-b", many[1]}}
	if all != 3 || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("trace index: %+v (%d rows in all); want %+v and nothing else", got, all, want)
	}
}
