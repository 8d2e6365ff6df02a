// Package database opens Jejak's connection pools, applies migrations and
// runs functions inside tenant-scoped transactions.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/jejakhq/jejak/db/schema"
	"github.com/jejakhq/jejak/internal/reqctx"
)

// Group roles the pools' logins belong to (created by
// db/schema/00001_roles.sql; the login roles by LoginURL).
const (
	// AppRole serves tenant-facing requests: row-level security pins every
	// read and write to the tenant set by InTenantTx.
	AppRole = "jejak_app"
	// SystemRole is the explicit cross-tenant path for the worker pool and
	// staff pages. Code holding only an AppRole pool cannot reach it.
	SystemRole = "jejak_system"
)

// Open connects the tenant-facing pool. url is the migration user's (a
// superuser or the database owner): the pool logs in as the jejak_app_login
// role derived from it (LoginURL), unless url already names that role.
// It refuses a role that is a superuser, has BYPASSRLS or owns tables.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return openDerived(ctx, url, AppRole, maxConns)
}

// OpenSystem connects the cross-tenant pool used by the job engine and the
// staff pages, as the jejak_system_login role derived from url.
func OpenSystem(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return openDerived(ctx, url, SystemRole, maxConns)
}

// OpenExplicit connects a pool with an operator-given URL whose user must
// be a member of group (AppRole or SystemRole) and nothing more; nothing is
// derived or created (JEJAK_APP_DATABASE_URL, JEJAK_SYSTEM_DATABASE_URL).
func OpenExplicit(ctx context.Context, url, group string, maxConns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, group, maxConns)
}

func openDerived(ctx context.Context, url, group string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.User != loginFor[group] {
		if url, err = LoginURL(ctx, url, group); err != nil {
			return nil, err
		}
	}
	return open(ctx, url, group, maxConns)
}

// PoolConfig is the configuration of a pool of group (AppRole or
// SystemRole) at url, as the Open functions make it: the session limits
// and planner settings as connection parameters (limits.go) and the type
// codecs of every connection. Tools that must see what the app's
// connections see (the benchmarks' plans) open theirs with it.
func PoolConfig(url, group string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	limitsFor(group).apply(cfg)
	cfg.AfterConnect = registerTypes
	return cfg, nil
}

func open(ctx context.Context, url, group string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(url, group, maxConns)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := checkRole(ctx, pool, group); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Migrate applies every pending migration from db/schema. It connects with
// the URL's own user (it must be able to create roles the first time), and
// each migration switches to jejak_owner for the objects it creates.
func Migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return MigrateDB(ctx, db)
}

// MigrateDB applies pending migrations on an open *sql.DB.
func MigrateDB(ctx context.Context, db *sql.DB) error { return MigrateDBTo(ctx, db, 0) }

// MigrateDBTo applies pending migrations up to and including version (0:
// all of them); tests of a migration stop before it to load old data.
func MigrateDBTo(ctx context.Context, db *sql.DB, version int64) error {
	// Serialise concurrent starts of several replicas.
	if _, err := db.ExecContext(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	defer db.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(727274)") //nolint:errcheck
	p, err := goose.NewProvider(goose.DialectPostgres, db, schema.FS)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if version > 0 {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	// Tables created by migrations after the membership check was added
	// get it too: every jejak_app tenant policy also requires the signed-in
	// user's membership (db/schema/00026_rls_membership.sql).
	if _, err := db.ExecContext(ctx, "SELECT app_enforce_membership()"); err != nil {
		return fmt.Errorf("enforce membership in row-level security policies: %w", err)
	}
	return nil
}

// Beginner is what the transaction helpers need: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// InTx runs fn in a transaction that commits when fn returns nil.
func InTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	if p, ok := db.(connAcquirer); ok {
		return inTx(ctx, func(ctx context.Context) (pgx.Tx, error) {
			return beginOnPool(ctx, p)
		}, fn)
	}
	return inTx(ctx, db.Begin, fn)
}

// txBeginner is a pool or connection that can open a transaction with a
// BEGIN statement of the caller's (a pgx.Tx cannot: it nests savepoints).
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

func inTx(ctx context.Context, begin func(context.Context) (pgx.Tx, error), fn func(pgx.Tx) error) (err error) {
	tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	done := trackCommit(tx)
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		done(err == nil)
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InTenantTx runs fn in a transaction scoped to one tenant: app.tenant_id is
// set with is_local=true so it vanishes at commit and never leaks to the next
// user of a pooled connection. Row-level security policies read it.
//
// When ctx carries a signed-in viewer (reqctx.WithViewer, set by the web
// layer for every signed-in request), app.user_id is set too and the
// policies also require that user's live membership of the tenant, so a
// handler that forgot its membership check still reads nothing. Worker and
// system paths carry no viewer and stay scoped by tenant alone.
func InTenantTx(ctx context.Context, db Beginner, tenantID int64, fn func(pgx.Tx) error) error {
	return inTenantTx(ctx, db, tenantID, viewerID(ctx), false, fn)
}

// viewerID is the signed-in user of ctx, 0 for none.
func viewerID(ctx context.Context) int64 {
	if v := reqctx.ViewerFrom(ctx); v != nil && v.UserID > 0 {
		return v.UserID
	}
	return 0
}

// InTenantUserTx is InTenantTx for an explicit user (0 = none): the
// policies admit the transaction only while userID is a member of tenantID.
func InTenantUserTx(ctx context.Context, db Beginner, tenantID, userID int64, fn func(pgx.Tx) error) error {
	return inTenantTx(ctx, db, tenantID, userID, false, fn)
}

// InTenantTxAsyncCommit is InTenantTx for a job handler's transaction,
// committed asynchronously (synchronous_commit off for it alone): COMMIT
// returns without waiting for its WAL flush, which under load is most of
// a short transaction's wait. Safe only for work that a crash may lose:
// the job's completion commits synchronously after it, and that flush
// writes this transaction's commit record too, since it precedes it in
// the WAL; should the crash come first, the job was never completed and
// runs again, as after any crash (the lost transaction's idempotency
// claims are lost with it). Never for anything acknowledged to someone
// before a synchronous commit follows it (an HTTP response, say).
func InTenantTxAsyncCommit(ctx context.Context, db Beginner, tenantID int64, fn func(pgx.Tx) error) error {
	return inTenantTx(ctx, db, tenantID, viewerID(ctx), true, fn)
}

func inTenantTx(ctx context.Context, db Beginner, tenantID, userID int64, async bool, fn func(pgx.Tx) error) error {
	if tenantID <= 0 {
		return errors.New("tenant transaction: tenant id must be positive")
	}
	if userID < 0 {
		return errors.New("tenant transaction: user id must not be negative")
	}
	if p, ok := db.(connAcquirer); ok {
		// The scoping goes out with the transaction's first statement
		// (beginOnPool), as one prepared statement for every tenant.
		args := scopeArgsOf(tenantID, userID)
		lead := queuedStmt{sql: readScope, args: []any{args.tenant, args.user}}
		if async {
			lead.sql += asyncCommit
		}
		return inTx(ctx, func(ctx context.Context) (pgx.Tx, error) {
			return beginOnPool(ctx, p, lead)
		}, fn)
	}
	scope := scopeStatement(tenantID, userID)
	if async {
		scope += asyncCommit
	}
	if b, ok := db.(txBeginner); ok {
		// BEGIN and the scoping in one round trip (one simple-protocol
		// string), instead of two: every tenant page runs several tenant
		// transactions, and under load each round trip waits for a CPU.
		return inTx(ctx, func(ctx context.Context) (pgx.Tx, error) {
			return b.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN; " + scope})
		}, fn)
	}
	return InTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, scope); err != nil {
			return fmt.Errorf("set tenant: %w", err)
		}
		return fn(tx)
	})
}

// scopeStatement sets the tenant and user (0 = none) for the rest of the
// transaction (is_local), as the row-level security policies read them.
// Both are integers formatted here, never caller text, so the statement
// needs no parameters and can share a simple-protocol string with BEGIN.
func scopeStatement(tenantID, userID int64) string {
	return "SELECT set_config('app.tenant_id', '" + strconv.FormatInt(tenantID, 10) +
		"', true), set_config('app.user_id', '" + userArg(userID) + "', true)"
}

// userArg is the app.user_id setting of user id userID ("" for none).
func userArg(userID int64) string {
	if userID > 0 {
		return strconv.FormatInt(userID, 10)
	}
	return ""
}

// asyncCommit, appended to a scoping statement, has the transaction
// commit without waiting for its WAL flush.
const asyncCommit = ", set_config('synchronous_commit', 'off', true)"

// ScopeTx scopes a transaction the caller began itself (say, a REPEATABLE
// READ snapshot) exactly as InTenantTx does: the tenant, and the signed-in
// viewer of ctx when there is one.
func ScopeTx(ctx context.Context, tx pgx.Tx, tenantID int64) error {
	_, err := tx.Exec(ctx, scopeStatement(tenantID, viewerID(ctx)))
	return err
}
