package signin

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
)

// SessionStore keeps sessions in the sessions table like scs's pgxstore
// (whose expiry sweep it reuses), but reads and writes with the request's
// context, so a request waiting for a busy pool gives up at its deadline
// instead of waiting forever.
type SessionStore struct {
	*pgxstore.PostgresStore
	st *store
	// gates reads a tenant page's session together with the tenant gate
	// (nil: tenant pages read the gate themselves, tenant.Service.Enter).
	gates *store
}

// NewSessionStore returns a store over pool that deletes expired sessions
// every cleanup. With system (the cross-tenant pool, on which the tenant
// gate is read anyway) a tenant page's session lookup reads the gate too.
func NewSessionStore(pool, system *pgxpool.Pool, cleanup time.Duration) *SessionStore {
	s := &SessionStore{PostgresStore: pgxstore.NewWithCleanupInterval(pool, cleanup), st: newStore(pool)}
	if system != nil {
		s.gates = newStore(system)
	}
	return s
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
	// slug is the tenant page's tenant ("" elsewhere); gate is what the
	// lookup read about user in it (nil when it did not read it).
	slug string
	gate *sessionGate
}

// sessionGate is a tenant gate read with the session.
type sessionGate struct {
	tenant *tenant.Tenant // nil: no such tenant
	g      tenant.Gate
}

type seenKey struct{}

// WithSessionMemo returns ctx able to carry, from the session's read to
// its commit in the same request, what was read, so an unchanged session
// whose expiry is recent is not written again. Wrap the request before
// the session middleware loads it. slug names the tenant of a tenant page
// ("" on other pages): the lookup then reads that tenant's gate for the
// session's user too (SessionMember).
func WithSessionMemo(ctx context.Context, slug string) context.Context {
	return context.WithValue(ctx, seenKey{}, &sessionSeen{slug: slug})
}

// FindCtx returns a live session's data.
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	seen, _ := ctx.Value(seenKey{}).(*sessionSeen)
	if seen != nil && seen.slug != "" && s.gates != nil {
		b, expiry, u, gate, ok, err := s.gates.sessionFindWithMember(ctx, token, seen.slug)
		if ok {
			*seen = sessionSeen{token: token, data: b, expiry: expiry, user: u, slug: seen.slug, gate: gate}
		}
		return b, ok, err
	}
	b, expiry, u, ok, err := s.st.sessionFind(ctx, token)
	if seen != nil && ok {
		*seen = sessionSeen{token: token, data: b, expiry: expiry, user: u}
	}
	return b, ok, err
}

// SessionMember is tenant.Service.Enter as this request's session lookup
// read it: the tenant named slug and userID's membership in it, or
// tenant.ErrNotFound. read is false when the lookup did not read that
// gate (another slug or user, no session store with the system pool, a
// session no sign-in indexed): the caller then calls Enter itself.
func SessionMember(ctx context.Context, slug string, userID int64) (t *tenant.Tenant, m *tenant.Membership, read bool, err error) {
	seen, _ := ctx.Value(seenKey{}).(*sessionSeen)
	if seen == nil || seen.gate == nil || seen.slug != slug || seen.user == nil || seen.user.ID != userID {
		return nil, nil, false, nil
	}
	if seen.gate.tenant == nil {
		return nil, nil, true, tenant.ErrNotFound
	}
	t, m, err = tenant.Admit(*seen.gate.tenant, seen.gate.g)
	return t, m, true, err
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

// SessionCodec encodes a session as a short binary record: the values in
// key order, so an unchanged session comes out as the bytes it was read as
// (CommitCtx then skips the write; a map encodes in Go's random order), and
// without gob, whose decoder compiled a type description from every
// session it read (a twentieth of the web process's CPU on a page). It
// reads sessions written by its earlier gob form and by scs's GobCodec.
// Values are int64 and string, all Jejak keeps; a session holding any
// other type is written in the gob form.
type SessionCodec struct{}

// sessionMagic starts the binary form. A gob stream starts with its first
// message's length, never 0, so the two cannot be confused.
const sessionMagic = "\x00\x01"

// Value kinds of the binary form.
const (
	kindInt64  = 'i'
	kindString = 's'
)

// sortedSession is a session as SessionCodec's gob form writes it.
type sortedSession struct {
	Deadline time.Time
	Keys     []string
	Values   []any
}

// Encode writes deadline and values, keys in order.
func (SessionCodec) Encode(deadline time.Time, values map[string]any) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(values))
	b := append(make([]byte, 0, 96), sessionMagic...)
	b = binary.AppendVarint(b, deadline.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		switch v := values[k].(type) {
		case int64:
			b = binary.AppendVarint(append(b, kindInt64), v)
		case string:
			b = appendString(append(b, kindString), v)
		default:
			return gobSession(deadline, keys, values)
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// gobSession is the gob form, for a session holding a value of another type.
func gobSession(deadline time.Time, keys []string, values map[string]any) ([]byte, error) {
	s := sortedSession{Deadline: deadline, Keys: keys, Values: make([]any, len(keys))}
	for i, k := range keys {
		s.Values[i] = values[k]
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&s); err != nil {
		return nil, fmt.Errorf("encode session: %w", err)
	}
	return b.Bytes(), nil
}

// Decode reads a session written by Encode, in either form, or by scs's
// GobCodec.
func (SessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	if rest, ok := bytes.CutPrefix(b, []byte(sessionMagic)); ok {
		return decodeBinary(rest)
	}
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

var errSessionForm = errors.New("decode session: malformed record")

// sessionReader reads the binary form, remembering the first fault.
type sessionReader struct {
	b   []byte
	err error
}

func (r *sessionReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errSessionForm, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *sessionReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errSessionForm, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *sessionReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err, r.b = errSessionForm, nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *sessionReader) kind() byte {
	if len(r.b) == 0 {
		r.err = errSessionForm
		return 0
	}
	k := r.b[0]
	r.b = r.b[1:]
	return k
}

func decodeBinary(b []byte) (time.Time, map[string]any, error) {
	r := sessionReader{b: b}
	deadline := time.Unix(0, r.varint())
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return time.Time{}, nil, errSessionForm
	}
	values := make(map[string]any, n)
	for range n {
		k := r.str()
		switch r.kind() {
		case kindInt64:
			values[k] = r.varint()
		case kindString:
			values[k] = r.str()
		default:
			return time.Time{}, nil, errSessionForm
		}
		if r.err != nil {
			return time.Time{}, nil, r.err
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return time.Time{}, nil, errSessionForm
	}
	return deadline, values, nil
}
