package incident_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/incident"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestIncidentFindsTheTracesJobs: among thousands of jobs, the incident of
// one trace finds exactly its jobs (including one since pruned). The plan of
// the statement itself is checked by TestPagePlansDoNotGrowWithTable.
func TestIncidentFindsTheTracesJobs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('inc', 'Inc') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	engine, err := job.New(job.Config{Pool: db.System, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "0123456789abcdef0123456789abcdef"
	ps := make([]job.EnqueueParams, 5000)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenant, Kind: "test.k", Payload: json.RawMessage(`{}`)}
		if i%1000 == 0 {
			ps[i].TraceID = trace
		}
	}
	var ids []int64
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { ids, err = engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	// Retention deleted one of the trace's jobs.
	if _, err := db.Admin.Exec(ctx, "DELETE FROM jobs WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, "ANALYZE jobs; ANALYZE job_traces"); err != nil {
		t.Fatal(err)
	}
	in, err := incident.NewService(db.System).Get(ctx, trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Jobs) != 4 || len(in.Tenants) != 1 || in.CrossTenant() {
		t.Fatalf("incident: %d jobs, %d tenants", len(in.Jobs), len(in.Tenants))
	}
	pruned := 0
	for _, e := range in.Entries {
		if e.Kind == incident.KindPruned && e.JobID == ids[0] {
			pruned++
		}
	}
	if pruned != 1 {
		t.Fatalf("pruned job shown %d times", pruned)
	}
	if _, err := incident.NewService(db.System).Get(ctx, "<bad>"); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("bad trace id: %v", err)
	}
}

// TestIncidentStopsAtLimit: the statement's LIMITs are literals (one cached
// plan); they must stay equal to incident.Limit, which the page uses to say
// that a section was cut.
func TestIncidentStopsAtLimit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('big-trace', 'Big') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	engine, err := job.New(job.Config{Pool: db.System, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "fedcba9876543210fedcba9876543210"
	for _, n := range []int{incident.Limit - 1, 2} {
		ps := make([]job.EnqueueParams, n)
		for i := range ps {
			ps[i] = job.EnqueueParams{TenantID: tenant, Kind: "test.k", Payload: json.RawMessage(`{}`), TraceID: trace}
		}
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err = engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
			t.Fatal(err)
		}
		in, err := incident.NewService(db.System).Get(ctx, trace)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			if len(in.Jobs) != incident.Limit || !in.Truncated {
				t.Fatalf("%d jobs in the trace: %d shown, truncated %v; want %d, true", incident.Limit+1, len(in.Jobs), in.Truncated, incident.Limit)
			}
		} else if len(in.Jobs) != n || in.Truncated {
			t.Fatalf("%d jobs in the trace: %d shown, truncated %v", n, len(in.Jobs), in.Truncated)
		}
	}
}
