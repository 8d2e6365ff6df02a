package schema_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/testdb"
)

// The tables docs/scaling.md (section 3, "Which table goes where") calls
// "distributed, co-located": distributed by tenant_id with Citus, so every
// primary key and unique index of theirs must lead with tenant_id, and
// every foreign key between them must carry it (tenant_id referencing
// tenant_id). Keep this list and the document's table the same.
var distributed = []string{
	"memberships", "projects", "subscriptions", "subscription_changes", "invitations",
	"jobs", "job_stats_minute", "job_stats_day", "job_counts", "job_count_deltas", "job_dead_groups",
	"job_traces",
	"audit_heads", "audit_sealed", "audit_day_counts", "audit_unsealed", "audit_search", "audit_words", "audit_search_heads", "audit_leaves", "audit_trees", "audit_checkpoints", "audit_tokens",
	"mail_messages", "subscription_status_changes", "processed_messages", "points_ledger", "points_balances",
	"outbox_messages", "outbox_traces", "webhook_endpoints", "webhook_deliveries", "webhook_attempts", "webhook_endpoint_hours",
	"approvals", "idempotency_keys", "staff_audit_views", "invoices", "payment_refunds",
	"alert_principal_minute", "tenant_settings",
}

// Reference tables (copied to every node): distributed tables may point
// foreign keys at them.
var reference = []string{"tenants", "users", "plans", "job_pauses", "app_secrets", "job_stats_folded"}

// Tables with a tenant_id column that stay coordinator-local, with why.
var tenantColumnButLocal = map[string]string{
	// Keyed by a global resource name two tenants may share.
	"resource_locks": "coordinator-local",
}

// TestCitusKeys fails when a key of a distributed table does not lead with
// tenant_id, when a foreign key between distributed tables does not carry
// it, or when a table with a tenant_id column is in neither list above
// (a new tenant table must be classified here and in docs/scaling.md).
func TestCitusKeys(t *testing.T) {
	db := testdb.New(t)
	ctx := context.Background()
	problems, err := citusKeyProblems(ctx, db.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}

	// The check itself finds each kind of problem: a key on id alone, a
	// unique index with tenant_id not leading, a foreign key that does not
	// match tenant_id with tenant_id, an unclassified tenant table.
	for _, c := range []struct{ ddl, want string }{
		{`ALTER TABLE projects ADD CONSTRAINT projects_id_again UNIQUE (id)`, "projects_id_again"},
		{`CREATE UNIQUE INDEX jobs_kind_tenant_again ON jobs (kind, tenant_id, id)`, "jobs_kind_tenant_again"},
		{`ALTER TABLE webhook_attempts ADD CONSTRAINT attempts_by_id_again FOREIGN KEY (delivery_id, tenant_id) REFERENCES webhook_deliveries (tenant_id, id)`, "attempts_by_id_again"},
		{`CREATE TABLE widgets (tenant_id bigint NOT NULL, id bigint PRIMARY KEY)`, "widgets"},
	} {
		tx, err := db.Admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, c.ddl); err != nil {
			t.Fatalf("%s: %v", c.ddl, err)
		}
		got, err := citusKeyProblems(ctx, tx)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("after %s the check found %q, nothing about %s", c.ddl, got, c.want)
		}
	}
}

// citusKeyProblems reads the catalog of the public schema and describes
// every key that would keep the tables from being distributed by tenant_id.
func citusKeyProblems(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]string, error) {
	var problems []string
	isDistributed := func(t string) bool { return slices.Contains(distributed, t) }

	withTenant, err := strings1(ctx, db, `
		SELECT c.relname FROM pg_class c
		  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
		 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
		 ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	for _, tbl := range withTenant {
		if !isDistributed(tbl) && tenantColumnButLocal[tbl] == "" {
			problems = append(problems, fmt.Sprintf("table %s has a tenant_id column but is neither distributed nor listed as local (classify it here and in docs/scaling.md)", tbl))
		}
	}
	for _, tbl := range distributed {
		if !slices.Contains(withTenant, tbl) {
			problems = append(problems, fmt.Sprintf("distributed table %s does not exist or has no tenant_id column", tbl))
		}
	}

	// Primary keys and unique indexes (constraints are backed by one), key
	// columns in order.
	rows, err := db.Query(ctx, `
		SELECT t.relname, ic.relname, i.indisprimary,
		       coalesce((SELECT array_agg(coalesce(a.attname, '(expression)') ORDER BY k.ord)
		                   FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		                   LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		                  WHERE k.ord <= i.indnkeyatts), '{}')::text[]
		  FROM pg_index i
		  JOIN pg_class ic ON ic.oid = i.indexrelid
		  JOIN pg_class t ON t.oid = i.indrelid
		 WHERE t.relnamespace = 'public'::regnamespace AND i.indisunique AND t.relname = ANY($1)
		 ORDER BY 1, 2`, distributed)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var tbl, idx string
		var primary bool
		var cols []string
		if err := rows.Scan(&tbl, &idx, &primary, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		if len(cols) == 0 || cols[0] != "tenant_id" {
			what := "unique index"
			if primary {
				what = "primary key"
			}
			problems = append(problems, fmt.Sprintf("%s %s on %s is (%s): it must lead with tenant_id", what, idx, tbl, strings.Join(cols, ", ")))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// Foreign keys touching a distributed table, column pairs in order.
	rows, err = db.Query(ctx, `
		SELECT c.conname, f.relname, r.relname,
		       (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
		          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)::text[],
		       (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, ord)
		          JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum)::text[]
		  FROM pg_constraint c
		  JOIN pg_class f ON f.oid = c.conrelid
		  JOIN pg_class r ON r.oid = c.confrelid
		 WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
		   AND (f.relname = ANY($1) OR r.relname = ANY($1))
		 ORDER BY 2, 1`, distributed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, from, to string
		var cols, refs []string
		if err := rows.Scan(&name, &from, &to, &cols, &refs); err != nil {
			return nil, err
		}
		switch {
		case !isDistributed(from):
			problems = append(problems, fmt.Sprintf("foreign key %s: %s (not distributed) references distributed %s", name, from, to))
		case slices.Contains(reference, to):
			// A distributed table may reference a reference table.
		case !isDistributed(to):
			problems = append(problems, fmt.Sprintf("foreign key %s: distributed %s references %s, which is neither distributed nor a reference table", name, from, to))
		default:
			carried := false
			for i := range cols {
				if cols[i] == "tenant_id" && refs[i] == "tenant_id" {
					carried = true
				}
			}
			if !carried {
				problems = append(problems, fmt.Sprintf("foreign key %s: %s (%s) references %s (%s) without tenant_id = tenant_id",
					name, from, strings.Join(cols, ", "), to, strings.Join(refs, ", ")))
			}
		}
	}
	return problems, rows.Err()
}

func strings1(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) ([]string, error) {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
