package job

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

func TestExplainClaim(t *testing.T) {
	if os.Getenv("JEJAK_EXPLAIN") == "" {
		t.Skip("set JEJAK_EXPLAIN=1")
	}
	db := testdb.New(t)
	ctx := context.Background()
	var a, b int64
	db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('a','a') RETURNING id").Scan(&a)
	db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('b','b') RETURNING id").Scan(&b)
	e, _ := New(Config{Pool: db.System})
	for i := 0; i < 20; i++ {
		ps := make([]EnqueueParams, 5000)
		for k := range ps {
			ps[k] = EnqueueParams{TenantID: a, Kind: "noop", Payload: json.RawMessage(`{}`)}
		}
		database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := e.EnqueueMany(ctx, tx, ps); return err })
	}
	db.Admin.Exec(ctx, "VACUUM ANALYZE jobs")
	explain := func(label string) {
		rows, err := db.System.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+claimSQL, nil, "default", "w", 100, 300.0, int64(0), 100, 0, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("=====", label)
		for rows.Next() {
			var s string
			rows.Scan(&s)
			fmt.Println(s)
		}
	}
	explain("fresh")
	for i := 0; i < 200; i++ {
		if _, err := e.Claim(ctx, "w", 100); err != nil {
			t.Fatal(err)
		}
	}
	explain("after 20k claimed")
}
