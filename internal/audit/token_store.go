package audit

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

// The audit_tokens table as token.go reads and writes it.

func tokenOf(r queries.AuditToken) Token {
	return Token{ID: r.ID, Name: r.Name, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		LastUsedAt: r.LastUsedAt, RevokedBy: r.RevokedBy, RevokedAt: r.RevokedAt}
}

// activeTokens counts tenantID's unrevoked tokens, first taking the
// tenant's token-creation lock (held to the end of the transaction).
func (s store) activeTokens(ctx context.Context, tenantID int64) (int64, error) {
	if err := s.q.AuditTokenLockTenant(ctx, tenantID); err != nil {
		return 0, wrapf(err, "lock audit tokens of tenant %d", tenantID)
	}
	return s.q.AuditTokenCountActive(ctx, tenantID)
}

func (s store) insertToken(ctx context.Context, tenantID, userID int64, name string, hash []byte, now *time.Time) (Token, error) {
	r, err := s.q.AuditTokenInsert(ctx, queries.AuditTokenInsertParams{TenantID: tenantID, Name: name,
		TokenHash: hash, CreatedBy: userID, Now: now})
	if err != nil {
		return Token{}, wrapf(err, "insert audit token of tenant %d", tenantID)
	}
	return tokenOf(r), nil
}

func (s store) tokens(ctx context.Context, tenantID int64) ([]Token, error) {
	rows, err := s.q.AuditTokenList(ctx, tenantID)
	if err != nil {
		return nil, wrapf(err, "list audit tokens of tenant %d", tenantID)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = tokenOf(r)
	}
	return out, nil
}

func (s store) token(ctx context.Context, tenantID, id int64) (Token, error) {
	r, err := s.q.AuditTokenGet(ctx, queries.AuditTokenGetParams{TenantID: tenantID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrTokenNotFound
	}
	if err != nil {
		return Token{}, wrapf(err, "read audit token %d of tenant %d", id, tenantID)
	}
	return tokenOf(r), nil
}

// revokeToken revokes an active token; a missing or revoked one is
// ErrTokenNotFound.
func (s store) revokeToken(ctx context.Context, tenantID, id, userID int64, now *time.Time) (Token, error) {
	r, err := s.q.AuditTokenRevoke(ctx, queries.AuditTokenRevokeParams{TenantID: tenantID, ID: id, RevokedBy: &userID, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrTokenNotFound
	}
	if err != nil {
		return Token{}, wrapf(err, "revoke audit token %d of tenant %d", id, tenantID)
	}
	return tokenOf(r), nil
}

// tokenByHash finds tenantID's token with that hash; ok is false when
// the tenant has none.
func (s store) tokenByHash(ctx context.Context, tenantID int64, hash []byte) (t Token, ok bool, err error) {
	r, err := s.q.AuditTokenByHash(ctx, queries.AuditTokenByHashParams{TenantID: tenantID, TokenHash: hash})
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, wrapf(err, "look up audit token of tenant %d", tenantID)
	}
	return tokenOf(r), true, nil
}

// touchToken moves an active token's last use to now unless it moved
// within every; used says it moved (a use to record).
func (s store) touchToken(ctx context.Context, tenantID, id int64, now *time.Time, every time.Duration) (t Token, used bool, err error) {
	r, err := s.q.AuditTokenTouch(ctx, queries.AuditTokenTouchParams{TenantID: tenantID, ID: id, Now: now, EverySeconds: every.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, wrapf(err, "note use of audit token %d of tenant %d", id, tenantID)
	}
	return tokenOf(r), true, nil
}
