package signin

import (
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

// FindCtx returns a live session's data.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	return s.st.sessionFind(ctx, token)
}

// CommitCtx writes a session.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	return s.st.sessionCommit(ctx, token, b, expiry)
}

// DeleteCtx removes a session.
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	return s.st.sessionDelete(ctx, token)
}
