package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// The v1 → log migration at scale: a database at the last v1 schema holds
// -audit-events hash-chained events over 20 tenants; timed are the
// migrations themselves (schema changes and index rebuilds on the full
// table) and the sealer integrating every v1 chain into the trees (the
// migrated trees signed), i.e. how long until every old event has a
// proof. The old chains are then checked against their v1 heads as
// anchors.

const (
	lastV1Schema = 97
	v1Tenants    = 20
)

func init() {
	register(Bench{Name: "audit_migration", Run: auditMigration})
}

func auditMigration(ctx context.Context, env *Env, _ string) (Result, error) {
	name := env.DBName("jejak_bench_audit_migration")
	if err := env.FreshDatabase(ctx, name); err != nil {
		return Result{}, err
	}
	defer env.DropDatabase(context.WithoutCancel(ctx), name) //nolint:errcheck
	url := env.DatabaseURL(name)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return Result{}, err
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	if err := database.MigrateDBTo(ctx, sqlDB, lastV1Schema); err != nil {
		return Result{}, fmt.Errorf("migrate to the v1 schema: %w", err)
	}
	admin, err := env.Admin(ctx, name)
	if err != nil {
		return Result{}, err
	}
	defer admin.Close()
	tenants := make([]int64, v1Tenants)
	for i := range tenants {
		slug := fmt.Sprintf("v1-tenant-%02d", i)
		if err := admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&tenants[i]); err != nil {
			return Result{}, err
		}
		if _, err := admin.Exec(ctx, `INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, 0, $2)`, tenants[i], make([]byte, 32)); err != nil {
			return Result{}, err
		}
	}
	n := env.Cfg.ScaleAuditEvents
	start := time.Now()
	var mu sync.Mutex
	last := time.Now()
	err = audit.SeedV1(ctx, admin, tenants, n, func(done int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			fmt.Printf("# v1 events: %d/%d (%.0f/s)\n", done, n, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		return Result{}, err
	}
	if _, err := admin.Exec(ctx, "VACUUM ANALYZE audit_events"); err != nil {
		return Result{}, err
	}
	fmt.Printf("# seeded %d v1 events in %s\n", n, time.Since(start).Round(time.Second))

	t0 := time.Now()
	if err := database.MigrateDB(ctx, sqlDB); err != nil {
		return Result{}, fmt.Errorf("migrate into the log: %w", err)
	}
	migrate := time.Since(t0)
	fmt.Printf("# migrations to the log: %s\n", migrate.Round(time.Millisecond))

	system, err := database.OpenSystem(ctx, url, 4)
	if err != nil {
		return Result{}, err
	}
	defer system.Close()
	signer, err := benchLogSigner()
	if err != nil {
		return Result{}, err
	}
	t1 := time.Now()
	if err := audit.NewSealer(system, audit.SealerOptions{Signer: signer}).Drain(ctx); err != nil {
		return Result{}, fmt.Errorf("integrate the v1 chains: %w", err)
	}
	integrate := time.Since(t1)
	var leaves int64
	if err := system.QueryRow(ctx, `SELECT coalesce(sum(size), 0) FROM audit_trees`).Scan(&leaves); err != nil {
		return Result{}, err
	}
	if leaves != int64(n) {
		return Result{}, fmt.Errorf("%d leaves after integrating %d v1 events", leaves, n)
	}
	// Every migrated log checks, and so does every v1 head as an anchor.
	anchors := map[int64][]audit.AnchorPoint{}
	rows, err := system.Query(ctx, `SELECT tenant_id, seq, hash FROM audit_heads`)
	if err != nil {
		return Result{}, err
	}
	for rows.Next() {
		var tenant int64
		var p audit.AnchorPoint
		if err := rows.Scan(&tenant, &p.V1Seq, &p.V1Hash); err != nil {
			return Result{}, err
		}
		anchors[tenant] = append(anchors[tenant], p)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	results, err := audit.VerifyAll(ctx, system, signer.VerifierKey(), anchors)
	if err != nil {
		return Result{}, err
	}
	for _, r := range results {
		if !r.OK {
			return Result{}, fmt.Errorf("migrated log of tenant %d: seq %d: %s", r.TenantID, r.FirstBadSeq, r.Reason)
		}
	}
	return Result{Metrics: []Metric{
		{"events", float64(n)},
		{"migrate_s", migrate.Seconds()},
		{"integrate_s", integrate.Seconds()},
		{"integrate_per_sec", float64(n) / integrate.Seconds()},
		{"total_s", (migrate + integrate).Seconds()},
	}}, nil
}
