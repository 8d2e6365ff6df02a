package signin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/queries"
)

// SessionStore keeps sessions in the sessions table like scs's pgxstore
// (whose expiry sweep it reuses), but reads and writes with the request's
// context, so a request waiting for a busy pool gives up at its deadline
// instead of waiting forever.
type SessionStore struct {
	*pgxstore.PostgresStore
	q *queries.Queries
}

// NewSessionStore returns a store over pool that deletes expired sessions
// every cleanup.
func NewSessionStore(pool *pgxpool.Pool, cleanup time.Duration) *SessionStore {
	return &SessionStore{PostgresStore: pgxstore.NewWithCleanupInterval(pool, cleanup), q: queries.New(pool)}
}

// FindCtx returns a live session's data.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	b, err := s.q.SessionFind(ctx, token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("find session: %w", err)
	}
	return b, true, nil
}

// CommitCtx writes a session.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if err := s.q.SessionCommit(ctx, queries.SessionCommitParams{Token: token, Data: b, Expiry: expiry}); err != nil {
		return fmt.Errorf("commit session: %w", err)
	}
	return nil
}

// DeleteCtx removes a session.
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	if err := s.q.SessionDelete(ctx, token); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
