package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// ScaleOptions sizes the large-data mode (millions of audit events and
// jobs, for the page benchmarks).
type ScaleOptions struct {
	Tenants     int // extra generated tenants besides the demo ones
	AuditEvents int
	Jobs        int
	Out         io.Writer // progress lines; nil = quiet
}

// SeedScale fills the database with millions of audit events and jobs over
// the demo tenants plus o.Tenants generated ones. Toko Bunga Melati comes
// first and so gets the largest share (audit.SeedScale weights tenant i by
// 1/(i+1)), which makes budi's timeline the big one to measure. ownerURL
// connects as a role allowed to ANALYZE (the migration user); fresh
// statistics matter for the plans of the first queries after a bulk load.
func SeedScale(ctx context.Context, system *pgxpool.Pool, ownerURL string, o ScaleOptions) error {
	tenants, err := scaleTenants(ctx, system, o.Tenants)
	if err != nil {
		return err
	}
	progress := func(what string, total int) func(int64) {
		if o.Out == nil {
			return nil
		}
		// Called from several seeding goroutines at once.
		var mu sync.Mutex
		start, last := time.Now(), time.Now()
		return func(done int64) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < 2*time.Second && done < int64(total) {
				return
			}
			last = time.Now()
			rate := float64(done) / time.Since(start).Seconds()
			fmt.Fprintf(o.Out, "%s: %d/%d (%.0f/s)\n", what, done, total, rate)
		}
	}
	if o.AuditEvents > 0 {
		if _, err := audit.SeedScale(ctx, system, tenants, o.AuditEvents, audit.SeedOptions{Progress: progress("audit events", o.AuditEvents)}); err != nil {
			return err
		}
	}
	if o.Jobs > 0 {
		if _, err := seedJobs(ctx, system, tenants, o.Jobs, progress("jobs", o.Jobs)); err != nil {
			return err
		}
		// The seeder writes jobs directly, past the statements that keep
		// the staff pages' counts.
		if err := job.RebuildCounts(ctx, system); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		return fmt.Errorf("connect to analyze: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE audit_sealed; ANALYZE audit_unsealed; ANALYZE audit_heads; ANALYZE jobs; ANALYZE tenants"); err != nil {
		return fmt.Errorf("analyze after bulk load: %w", err)
	}
	return nil
}

// scaleTenants returns the demo tenants (Melati first) and n generated
// ones, creating the latter when missing.
func scaleTenants(ctx context.Context, system database.Beginner, n int) ([]int64, error) {
	var ids []int64
	err := database.InTx(ctx, system, func(tx pgx.Tx) error {
		for _, t := range Tenants {
			var id int64
			if err := tx.QueryRow(ctx, `SELECT id FROM tenants WHERE slug = $1`, t.Slug).Scan(&id); err != nil {
				return fmt.Errorf("demo tenant %s (run web seed first): %w", t.Slug, err)
			}
			ids = append(ids, id)
		}
		for i := 1; i <= n; i++ {
			var id int64
			slug := fmt.Sprintf("skala-%04d", i)
			if err := tx.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ($1, $2)
				ON CONFLICT (slug) DO UPDATE SET name = tenants.name RETURNING id`, slug, fmt.Sprintf("Skala %04d", i)).Scan(&id); err != nil {
				return fmt.Errorf("scale tenant %s: %w", slug, err)
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}
