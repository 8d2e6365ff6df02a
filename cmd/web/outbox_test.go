package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/testdb"
)

func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	env := func(k string) string {
		if k == "DATABASE_URL" {
			return db.URL
		}
		return ""
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"seed"}, env, &out); err != nil {
		t.Fatalf("seed: %v", err)
	}
	// Two failed messages of kopi-senja and one of toko-bunga-melati.
	_, err := db.Admin.Exec(ctx, `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload,
		created_at, available_at, state, attempts, last_error)
		SELECT t.id, 'project.created', 'project', g::text, '{}', now(), now(), 'failed', 5, 'nats: timeout'
		  FROM tenants t, generate_series(1, CASE WHEN t.slug = 'kopi-senja' THEN 2 ELSE 1 END) g
		 WHERE t.slug IN ('kopi-senja', 'toko-bunga-melati')`)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, []string{"outbox", "status"}, env, &out); err != nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(out.String(), "failed       3") || !strings.Contains(out.String(), "nats: timeout") {
		t.Fatalf("status output:\n%s", out.String())
	}
	if err := run(ctx, []string{"outbox", "retry-failed", "--tenant", "kopi-senja"}, env, &out); err == nil {
		t.Fatal("retry without --reason accepted")
	}
	if err := run(ctx, []string{"outbox", "retry-failed", "--tenant", "nope", "--reason", "x"}, env, &out); err == nil {
		t.Fatal("unknown tenant accepted")
	}
	out.Reset()
	if err := run(ctx, []string{"outbox", "retry-failed", "--tenant", "kopi-senja", "--reason", "NATS is back"}, env, &out); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !strings.Contains(out.String(), "2 failed outbox messages returned to pending") {
		t.Fatalf("retry output: %s", out.String())
	}
	var failed, audited int
	if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox_messages WHERE state = 'failed'),
		(SELECT count(*) FROM audit_events a JOIN tenants t ON t.id = a.tenant_id
		  WHERE t.slug = 'kopi-senja' AND a.action = 'outbox.retry' AND a.detail->>'reason' = 'NATS is back' AND a.detail->>'via' = 'cli')`).Scan(&failed, &audited); err != nil {
		t.Fatal(err)
	}
	if failed != 1 || audited != 1 {
		t.Fatalf("after retry: %d failed, %d audit events", failed, audited)
	}
	if err := run(ctx, []string{"outbox", "explode"}, env, &out); err == nil {
		t.Fatal("unknown outbox subcommand accepted")
	}
}
