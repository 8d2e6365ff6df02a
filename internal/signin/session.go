package signin

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/user"
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
	user   *user.User // the user the session was signed in as, read with it
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
	b, expiry, u, ok, err := s.st.sessionFind(ctx, token)
	if seen, _ := ctx.Value(seenKey{}).(*sessionSeen); seen != nil && ok {
		*seen = sessionSeen{token: token, data: b, expiry: expiry, user: u}
	}
	return b, ok, err
}

// SessionUser returns user id as this request's session lookup read it
// (the lookup joins the user the session was signed in as), or nil when
// the lookup did not read that user: the caller then reads it itself.
// It saves every signed-in page a query.
func SessionUser(ctx context.Context, id int64) *user.User {
	if seen, _ := ctx.Value(seenKey{}).(*sessionSeen); seen != nil && seen.user != nil && seen.user.ID == id {
		return seen.user
	}
	return nil
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

// SessionCodec is scs's gob encoding with the values in key order: a map
// encodes in Go's random iteration order, so an unchanged session came out
// as different bytes on some requests and CommitCtx wrote it back. It
// reads sessions written by scs's GobCodec as well.
type SessionCodec struct{}

// sortedSession is a session as SessionCodec writes it.
type sortedSession struct {
	Deadline time.Time
	Keys     []string
	Values   []any
}

// Encode writes deadline and values, keys in order.
func (SessionCodec) Encode(deadline time.Time, values map[string]any) ([]byte, error) {
	s := sortedSession{Deadline: deadline, Keys: slices.Sorted(maps.Keys(values))}
	s.Values = make([]any, len(s.Keys))
	for i, k := range s.Keys {
		s.Values[i] = values[k]
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&s); err != nil {
		return nil, fmt.Errorf("encode session: %w", err)
	}
	return b.Bytes(), nil
}

// Decode reads a session written by Encode or by scs's GobCodec.
func (SessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	var s sortedSession
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil || len(s.Keys) != len(s.Values) {
		return scs.GobCodec{}.Decode(b)
	}
	values := make(map[string]any, len(s.Keys))
	for i, k := range s.Keys {
		values[k] = s.Values[i]
	}
	return s.Deadline, values, nil
}
