package signin_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/user"
)

// TestSessionCommitSettingStaysInItsTransaction: a session write commits
// asynchronously for its own transaction only. On a one-connection pool
// the session is stored and readable, and the connection still commits
// synchronously afterwards (sign-out and everything else rely on that).
func TestSessionCommitSettingStaysInItsTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := signin.NewSessionStore(pool, nil, time.Hour)
	for i, data := range [][]byte{[]byte("first"), []byte("second")} {
		if err := s.CommitCtx(ctx, "tok", data, time.Now().Add(time.Hour)); err != nil { //nolint:forbidigo // session expiry is wall time
			t.Fatalf("commit %d: %v", i, err)
		}
		got, found, err := s.FindCtx(ctx, "tok")
		if err != nil || !found || !bytes.Equal(got, data) {
			t.Fatalf("find after commit %d = %q, %v, %v", i, got, found, err)
		}
		var setting string
		if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Fatalf("after a session commit the connection has synchronous_commit=%s", setting)
		}
	}
	if err := s.DeleteCtx(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.FindCtx(ctx, "tok"); err != nil || found {
		t.Fatalf("find after delete: found %v, %v", found, err)
	}
}

// TestSessionLookupReadsItsUser: finding a session also reads the user it
// was signed in as (indexed in user_sessions), so the request needs no
// query of its own for the viewer; a session of no indexed user, or a
// question about another user id, gets nil (the caller then reads the
// user itself).
func TestSessionLookupReadsItsUser(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var uid int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO users (email, name, password_hash, staff_role, locale, time_zone)
		VALUES ('sinta@jejak.test', 'Sinta', 'x', 'support', 'id', 'Asia/Jakarta') RETURNING id`).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	s := signin.NewSessionStore(pool, nil, time.Hour)
	exp := time.Now().Add(time.Hour) //nolint:forbidigo // session expiry is wall time
	for _, tok := range []string{"signed", "anonymous"} {
		if err := s.CommitCtx(ctx, tok, []byte(tok), exp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO user_sessions (token, user_id) VALUES ('signed', $1)`, uid); err != nil {
		t.Fatal(err)
	}
	rctx := signin.WithSessionMemo(ctx, "")
	if _, found, err := s.FindCtx(rctx, "signed"); err != nil || !found {
		t.Fatalf("find: %v %v", found, err)
	}
	u := signin.SessionUser(rctx, uid)
	if u == nil || u.ID != uid || u.Name != "Sinta" || u.Email != "sinta@jejak.test" || u.StaffRole != "support" ||
		u.Locale != "id" || u.TimeZone != "Asia/Jakarta" || !u.Active {
		t.Fatalf("session user = %+v", u)
	}
	// Every field the user service reads, the session lookup reads too: a
	// column added to one and not the other would show stale or empty
	// values on every signed-in page.
	full, err := user.NewService(user.NewStore(pool)).Get(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}
	fv, sv := reflect.ValueOf(*full), reflect.ValueOf(*u)
	for i := range fv.NumField() {
		if f := fv.Type().Field(i); f.IsExported() && !reflect.DeepEqual(fv.Field(i).Interface(), sv.Field(i).Interface()) {
			t.Errorf("session user's %s = %v, the user service reads %v", f.Name, sv.Field(i), fv.Field(i))
		}
	}
	if signin.SessionUser(rctx, uid+1) != nil {
		t.Fatal("SessionUser answered for a user the session was not signed in as")
	}
	rctx = signin.WithSessionMemo(ctx, "")
	if _, found, err := s.FindCtx(rctx, "anonymous"); err != nil || !found {
		t.Fatalf("find: %v %v", found, err)
	}
	if signin.SessionUser(rctx, uid) != nil {
		t.Fatal("a session of no indexed user gave a user")
	}
}

// TestSessionLookupReadsTheTenantGate: on a tenant page the session lookup
// reads, in the same query, the tenant named by the page's slug and the
// session user's membership in it, and decides as tenant.Service.Enter
// does: a member is admitted with their role and settings; a disabled
// membership, another tenant, an unknown slug and the system tenant are
// all "not found". A question about another slug or user was not read.
func TestSessionLookupReadsTheTenantGate(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var uid, melati, senja, system int64
	for _, q := range []struct {
		sql string
		id  *int64
	}{
		{`INSERT INTO users (email, name, password_hash) VALUES ('budi@melati.test', 'Budi', 'x') RETURNING id`, &uid},
		{`INSERT INTO tenants (slug, name, time_zone) VALUES ('melati', 'Melati', 'Asia/Makassar') RETURNING id`, &melati},
		{`INSERT INTO tenants (slug, name) VALUES ('senja', 'Senja') RETURNING id`, &senja},
		{`SELECT id FROM tenants WHERE is_system`, &system},
	} {
		if err := db.Admin.QueryRow(ctx, q.sql).Scan(q.id); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'admin')`, []any{melati, uid}},
		{`INSERT INTO memberships (tenant_id, user_id, role, disabled_at) VALUES ($1, $2, 'owner', now())`, []any{senja, uid}},
		{`INSERT INTO tenant_settings (tenant_id, members_see_billing) VALUES ($1, true)`, []any{melati}},
		{`INSERT INTO user_sessions (token, user_id) VALUES ('signed', $1)`, []any{uid}},
	} {
		if _, err := db.Admin.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	var systemSlug string
	if err := db.Admin.QueryRow(ctx, `SELECT slug FROM tenants WHERE id = $1`, system).Scan(&systemSlug); err != nil {
		t.Fatal(err)
	}
	s := signin.NewSessionStore(db.App, db.System, time.Hour)
	if err := s.CommitCtx(ctx, "signed", []byte("data"), time.Now().Add(time.Hour)); err != nil { //nolint:forbidigo // session expiry is wall time
		t.Fatal(err)
	}
	find := func(slug string) context.Context {
		t.Helper()
		rctx := signin.WithSessionMemo(ctx, slug)
		if b, found, err := s.FindCtx(rctx, "signed"); err != nil || !found || string(b) != "data" {
			t.Fatalf("find on %q: %q %v %v", slug, b, found, err)
		}
		if u := signin.SessionUser(rctx, uid); u == nil || u.Name != "Budi" {
			t.Fatalf("find on %q read user %+v", slug, u)
		}
		return rctx
	}
	rctx := find("melati")
	tn, m, read, err := signin.SessionMember(rctx, "melati", uid)
	if !read || err != nil || tn.ID != melati || tn.Slug != "melati" || tn.Name != "Melati" || tn.TimeZone != "Asia/Makassar" ||
		m.TenantID != melati || m.UserID != uid || m.Role != "admin" || !m.MembersSeeBilling {
		t.Fatalf("member: read %v, %+v %+v (%v)", read, tn, m, err)
	}
	if _, _, read, _ := signin.SessionMember(rctx, "senja", uid); read {
		t.Fatal("a slug the lookup did not read was answered")
	}
	if _, _, read, _ := signin.SessionMember(rctx, "melati", uid+1); read {
		t.Fatal("a user the session was not signed in as was answered")
	}
	for _, slug := range []string{"senja", "nowhere", systemSlug} {
		rctx := find(slug)
		if tn, m, read, err := signin.SessionMember(rctx, slug, uid); !read || !errors.Is(err, tenant.ErrNotFound) || tn != nil || m != nil {
			t.Fatalf("%s: read %v, %+v %+v (%v), want not found", slug, read, tn, m, err)
		}
	}
	rctx = find("")
	if _, _, read, _ := signin.SessionMember(rctx, "", uid); read {
		t.Fatal("a page without a tenant read a gate")
	}
}
