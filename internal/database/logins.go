package database

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Each pool logs in as its own LOGIN role, a member of exactly one group
// role (jejak_app or jejak_system). A pool that connected as the URL's
// superuser and switched with SET ROLE could switch back (RESET ROLE) and
// leave row-level security, or set session_replication_role and silence
// the audit triggers; a login role that is only a member of jejak_app has
// nothing to switch back to.
const (
	AppLogin    = "jejak_app_login"
	SystemLogin = "jejak_system_login"
)

// loginFor maps a group role to the login role Jejak creates for it.
var loginFor = map[string]string{AppRole: AppLogin, SystemRole: SystemLogin}

// ErrUnsafeRole: the role a pool logged in as has more power than its
// group role (superuser, BYPASSRLS, owner of tables, or member of another
// Jejak role). Jejak refuses to start on it.
var ErrUnsafeRole = errors.New("database role is not safe for this pool")

var loginCache sync.Map // admin URL → map[group role]login URL

// LoginURL returns the URL that logs in as group's login role, derived
// from adminURL (the migration user's). The first call for a database
// creates the login role if it is missing; its password is an HMAC of the
// role's name keyed with the database's 'role-passwords' secret, which only
// the owner can read, so every replica derives the same password and
// nothing is rotated at start. A role whose password does not match (it
// was created for another database of the same cluster) gets it set again.
func LoginURL(ctx context.Context, adminURL, group string) (string, error) {
	if m, ok := loginCache.Load(adminURL); ok {
		if u, ok := m.(map[string]string)[group]; ok {
			return u, nil
		}
	}
	urls, err := ensureLogins(ctx, adminURL)
	if err != nil {
		return "", err
	}
	loginCache.Store(adminURL, urls)
	u, ok := urls[group]
	if !ok {
		return "", fmt.Errorf("no login role for %s", group)
	}
	return u, nil
}

func ensureLogins(ctx context.Context, adminURL string) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to create login roles: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var secret []byte
	if err := conn.QueryRow(ctx, "SELECT key FROM app_secrets WHERE name = 'role-passwords'").Scan(&secret); err != nil {
		return nil, fmt.Errorf("read the login roles' secret (the URL's user must be the database owner or a superuser): %w", err)
	}
	out := map[string]string{}
	for group, login := range loginFor {
		pw := derivePassword(secret, login)
		if err := ensureRole(ctx, conn, login, group, pw); err != nil {
			return nil, err
		}
		u, err := withUser(adminURL, login, pw)
		if err != nil {
			return nil, err
		}
		if err := checkLogin(ctx, u); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				return nil, fmt.Errorf("log in as %s: %w", login, err)
			}
			// Created for another database of this cluster: take it over.
			if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", pgx.Identifier{login}.Sanitize(), quoteLiteral(pw))); err != nil {
				return nil, fmt.Errorf("set password of %s: %w", login, err)
			}
		}
		out[group] = u
	}
	return out, nil
}

func derivePassword(secret []byte, role string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("jejak login role password\x00" + role))
	return hex.EncodeToString(m.Sum(nil))
}

// ensureRole creates login as a member of group only. Replicas (and test
// binaries) start concurrently and roles are cluster-wide: a role created
// by someone else in the meantime is fine.
func ensureRole(ctx context.Context, conn *pgx.Conn, login, group, pw string) error {
	var exists, member bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1),
		       EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
		               JOIN pg_roles g ON g.oid = m.roleid WHERE r.rolname = $1 AND g.rolname = $2)`,
		login, group).Scan(&exists, &member); err != nil {
		return fmt.Errorf("look up role %s: %w", login, err)
	}
	if !exists {
		_, err := conn.Exec(ctx, fmt.Sprintf(
			"CREATE ROLE %s LOGIN INHERIT NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD %s IN ROLE %s",
			pgx.Identifier{login}.Sanitize(), quoteLiteral(pw), pgx.Identifier{group}.Sanitize()))
		if err != nil && !isDuplicate(err) {
			return fmt.Errorf("create login role %s: %w", login, err)
		}
		return nil
	}
	if !member {
		if _, err := conn.Exec(ctx, fmt.Sprintf("GRANT %s TO %s", pgx.Identifier{group}.Sanitize(), pgx.Identifier{login}.Sanitize())); err != nil && !isDuplicate(err) {
			return fmt.Errorf("grant %s to %s: %w", group, login, err)
		}
	}
	return nil
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	// duplicate_object, unique_violation (concurrent CREATE ROLE), and
	// "tuple concurrently updated" (XX000) from concurrent GRANTs.
	return errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505" || pgErr.Code == "XX000")
}

func quoteLiteral(s string) string {
	// s is hex: no quotes to escape.
	return "'" + s + "'"
}

func withUser(raw, user, password string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(user, password)
		return u.String(), nil
	}
	// A key=value connection string: later keys win.
	return raw + " user=" + user + " password=" + password, nil
}

func checkLogin(ctx context.Context, u string) error {
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// checkRole refuses a pool whose role could do more than group allows:
// a superuser, a BYPASSRLS role, a role that owns (or is a member of the
// owner of) any table, or one that can use another Jejak role.
func checkRole(ctx context.Context, q Querier, group string) error {
	var (
		user                               string
		super, bypass, owns, inGroup, wide bool
	)
	err := q.QueryRow(ctx, `
		SELECT current_user, r.rolsuper, r.rolbypassrls,
		       EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		               WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
		                 AND n.nspname NOT LIKE 'pg_toast%'
		                 AND pg_has_role(current_user, c.relowner, 'USAGE')),
		       pg_has_role(current_user, $1, 'USAGE'),
		       EXISTS (SELECT FROM pg_roles o
		               WHERE o.rolname IN ('jejak_owner', 'jejak_app', 'jejak_system') AND o.rolname <> $1
		                 AND pg_has_role(current_user, o.oid, 'USAGE'))
		  FROM pg_roles r WHERE r.rolname = current_user`, group).
		Scan(&user, &super, &bypass, &owns, &inGroup, &wide)
	if err != nil {
		return fmt.Errorf("inspect pool role: %w", err)
	}
	switch {
	case super:
		return fmt.Errorf("%w: %s is a superuser", ErrUnsafeRole, user)
	case bypass:
		return fmt.Errorf("%w: %s has BYPASSRLS", ErrUnsafeRole, user)
	case owns:
		return fmt.Errorf("%w: %s owns tables", ErrUnsafeRole, user)
	case !inGroup:
		return fmt.Errorf("%w: %s is not a member of %s", ErrUnsafeRole, user, group)
	case wide:
		return fmt.Errorf("%w: %s can use another Jejak role besides %s", ErrUnsafeRole, user, group)
	}
	return nil
}
