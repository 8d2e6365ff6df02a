package signin

import (
	"bytes"
	"context"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionStore keeps sessions in the sessions table like scs's pgxstore
// (whose expiry sweep it reuses), but reads and writes with the request's
// context, so a request waiting for a busy pool gives up at its deadline
// instead of waiting forever.
type SessionStore struct {
	*pgxstore.PostgresStore
	st *store
}

// NewSessionStore returns a store over pool that deletes expired sessions
// every cleanup.
func NewSessionStore(pool *pgxpool.Pool, cleanup time.Duration) *SessionStore {
	return &SessionStore{PostgresStore: pgxstore.NewWithCleanupInterval(pool, cleanup), st: newStore(pool)}
}

// RefreshEvery is how far the idle timeout must have moved a session's
// expiry before an unchanged session is written again: scs commits the
// session on every request to move it, which made every page a write.
// An idle session so expires up to RefreshEvery early.
const RefreshEvery = 5 * time.Minute

// sessionSeen is what FindCtx read during one request, for CommitCtx.
type sessionSeen struct {
	token  string
	data   []byte
	expiry time.Time
}

type seenKey struct{}

// WithSessionMemo returns ctx able to carry, from the session's read to
// its commit in the same request, what was read, so an unchanged session
// whose expiry is recent is not written again. Wrap the request before
// the session middleware loads it.
func WithSessionMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, seenKey{}, &sessionSeen{})
}

// FindCtx returns a live session's data.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	b, expiry, ok, err := s.st.sessionFind(ctx, token)
	if seen, _ := ctx.Value(seenKey{}).(*sessionSeen); seen != nil && ok {
		*seen = sessionSeen{token: token, data: b, expiry: expiry}
	}
	return b, ok, err
}

// CommitCtx writes a session, unless it is the one this request read,
// unchanged, and its stored expiry is less than RefreshEvery behind the
// new one.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if seen, _ := ctx.Value(seenKey{}).(*sessionSeen); seen != nil && seen.token == token &&
		bytes.Equal(seen.data, b) && !expiry.Before(seen.expiry) && expiry.Sub(seen.expiry) < RefreshEvery {
		return nil
	}
	return s.st.sessionCommit(ctx, token, b, expiry)
}

// DeleteCtx removes a session.
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	return s.st.sessionDelete(ctx, token)
}
