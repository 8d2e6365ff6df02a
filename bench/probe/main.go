package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

func main() {
	ctx := context.Background()
	url := "postgres://postgres@127.0.0.1:5432/jj_probe?sslmode=disable"
	if err := database.Migrate(ctx, url); err != nil {
		panic(err)
	}
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	rows, _ := admin.Query(ctx, `INSERT INTO tenants (slug, name) SELECT 'bench-' || g, 'B ' || g FROM generate_series(1, 10) g RETURNING id`)
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		panic(err)
	}
	sys, err := database.OpenSystem(ctx, url, 10)
	if err != nil {
		panic(err)
	}
	eng, err := job.New(job.Config{Pool: sys, Workers: 10, BatchSize: 100})
	if err != nil {
		panic(err)
	}
	n := 0
	for b := 0; b < 40; b++ {
		ps := make([]job.EnqueueParams, 5000)
		for i := range ps {
			ps[i] = job.EnqueueParams{TenantID: tenants[n%len(tenants)], Kind: "bench.noop", Payload: json.RawMessage(`{}`)}
			n++
		}
		if err := database.InTx(ctx, sys, func(tx pgx.Tx) error { _, err := eng.EnqueueMany(ctx, tx, ps); return err }); err != nil {
			panic(err)
		}
	}
	fmt.Fprintln(os.Stderr, "seeded", n)
}
