package signin_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/signin"
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
	s := signin.NewSessionStore(pool, time.Hour)
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
	s := signin.NewSessionStore(pool, time.Hour)
	exp := time.Now().Add(time.Hour) //nolint:forbidigo // session expiry is wall time
	for _, tok := range []string{"signed", "anonymous"} {
		if err := s.CommitCtx(ctx, tok, []byte(tok), exp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO user_sessions (token, user_id) VALUES ('signed', $1)`, uid); err != nil {
		t.Fatal(err)
	}
	rctx := signin.WithSessionMemo(ctx)
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
	rctx = signin.WithSessionMemo(ctx)
	if _, found, err := s.FindCtx(rctx, "anonymous"); err != nil || !found {
		t.Fatalf("find: %v %v", found, err)
	}
	if signin.SessionUser(rctx, uid) != nil {
		t.Fatal("a session of no indexed user gave a user")
	}
}
