package member_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/member"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

type env struct {
	db      *testdb.DB
	tenants *tenant.Service
	members *member.Service
}

func setup(t *testing.T) *env {
	t.Helper()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatal(err)
	}
	ts := tenant.NewService(db.App, db.System, clock.Database{})
	return &env{db: db, tenants: ts, members: member.NewService(db.App, db.System, clock.Database{}, mail.NewSink(db.System), ts)}
}

func (e *env) id(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := e.db.Admin.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return id
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Admin.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestLastOwnerHoldsUnderConcurrency: with two owners, "demote me" and
// "remove the other" sent together must not both succeed, in either order
// the database picks; the one that loses says why.
func TestLastOwnerHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	eko := e.id(t, `SELECT id FROM users WHERE email = 'eko@melati.test'`)
	owner := tenant.Actor{UserID: budi, Role: tenant.RoleOwner, TraceID: "race"}

	const rounds = 40
	for i := range rounds {
		// Budi is the sole owner and promotes Eko (re-added when a
		// previous round removed him).
		e.exec(t, `UPDATE memberships SET role = 'owner' WHERE tenant_id = $1 AND user_id = $2`, melati, budi)
		e.exec(t, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'admin')
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = 'admin'`, melati, eko)
		if err := e.tenants.SetMembership(ctx, melati, owner, eko, tenant.RoleOwner); err != nil {
			t.Fatalf("round %d: promote eko: %v", i, err)
		}

		start := make(chan struct{})
		var wg sync.WaitGroup
		var demoteErr, removeErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			demoteErr = e.tenants.SetMembership(ctx, melati, owner, budi, tenant.RoleAdmin)
		}()
		go func() {
			defer wg.Done()
			<-start
			removeErr = e.members.Remove(ctx, melati, owner, eko)
		}()
		close(start)
		wg.Wait()

		if owners := e.id(t, `SELECT count(*) FROM memberships WHERE tenant_id = $1 AND role = 'owner'`, melati); owners < 1 {
			t.Fatalf("round %d: the tenant has no owner (demote: %v, remove: %v)", i, demoteErr, removeErr)
		}
		failed := 0
		for _, err := range []error{demoteErr, removeErr} {
			if err == nil {
				continue
			}
			failed++
			if c := apperr.CodeOf(err); c != apperr.CodeConflict && c != apperr.CodeInvalid {
				t.Fatalf("round %d: refusal is %v (%s), want conflict or invalid", i, err, c)
			}
		}
		if failed != 1 {
			t.Fatalf("round %d: %d of the two failed (demote: %v, remove: %v), want exactly one", i, failed, demoteErr, removeErr)
		}
	}
}
