package audit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/plaintext"
)

// Read-only audit tokens let a witness outside the operator (web audit
// witness, run by a tenant or an auditor) read a tenant's log endpoints
// (checkpoint, proofs, entries) without a session. A token reads nothing
// else: the web tier accepts it on the log routes only. The database keeps
// its SHA-256, never the token; creation, use and revocation are recorded
// in the tenant's trail.

// TokenPrefix starts every audit token, so a leaked one is recognisable.
const TokenPrefix = "jat_"

const (
	tokenBytes = 32
	// MaxTokenName bounds a token's name (runes).
	MaxTokenName = 64
	// MaxActiveTokens bounds a tenant's unrevoked tokens.
	MaxActiveTokens = 20
	// tokenUseEvery is how often one token's use is recorded at most: a
	// witness polling every few seconds writes one event a minute, not one
	// a request.
	tokenUseEvery = time.Minute
)

// tokenPattern is the shape of TokenPrefix + base64url(32 bytes).
var tokenPattern = regexp.MustCompile(`^jat_[A-Za-z0-9_-]{43}$`)

// ValidToken reports whether s has the shape of an audit token.
func ValidToken(s string) bool { return tokenPattern.MatchString(s) }

// Token errors, with their application error codes.
var (
	ErrTokenMalformed = apperr.Malformed("malformed audit token: want " + TokenPrefix + " followed by 43 characters")
	ErrTokenRevoked   = apperr.Unauthenticated("this audit token was revoked")
	// ErrTokenNotFound is also the answer to a token the tenant does not
	// have (unknown, or another tenant's): a 404 like a tenant that does
	// not exist, so a token tells nothing about other tenants.
	ErrTokenNotFound = apperr.NotFound("audit token not found")
	ErrTooManyTokens = apperr.Invalidf("name", "A tenant has at most %d active audit tokens: revoke one first.", MaxActiveTokens)
)

// Token is a read-only audit token as listed to its tenant's owners.
type Token struct {
	ID         int64
	Name       string
	CreatedBy  int64
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedBy  *int64
	RevokedAt  *time.Time
}

// Active reports whether the token still authenticates.
func (t Token) Active() bool { return t.RevokedAt == nil }

// Tokens creates, lists, revokes and checks audit tokens, each in its
// tenant's transaction (jejak_app).
type Tokens struct {
	app database.Beginner
	rec *Recorder
	clk clock.Clock
}

// NewTokens returns the token service over the tenant-facing pool.
func NewTokens(app database.Beginner, clk clock.Clock) *Tokens {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Tokens{app: app, rec: NewRecorder(clk), clk: clk}
}

// CheckTokenName returns the trimmed name, or an Invalid error for the
// "name" field.
func CheckTokenName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", apperr.Invalid("name", "Give the token a name, e.g. the machine that runs the witness.")
	case utf8.RuneCountInString(name) > MaxTokenName:
		return "", apperr.Invalidf("name", "A token name has at most %d characters.", MaxTokenName)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", apperr.Invalid("name", "A token name is one line of text.")
	}
	if r, bad := plaintext.NameProblem(name); bad {
		return "", apperr.Invalidf("name", "A token name must not contain invisible or text-direction characters (found U+%04X).", r)
	}
	return name, nil
}

// Create makes a token for tenantID on behalf of userID (an owner or an
// admin: the caller checks the role) and returns it with its secret,
// which is shown once and never stored.
func (s *Tokens) Create(ctx context.Context, tenantID, userID int64, name string) (Token, string, error) {
	name, err := CheckTokenName(name)
	if err != nil {
		return Token{}, "", err
	}
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return Token{}, "", fmt.Errorf("audit token: %w", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	hash := sha256.Sum256([]byte(secret))
	var out Token
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		n, err := st.activeTokens(ctx, tenantID)
		if err != nil {
			return err
		}
		if n >= MaxActiveTokens {
			return ErrTooManyTokens
		}
		if out, err = st.insertToken(ctx, tenantID, userID, name, hash[:], s.clk.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, &userID, "audit_token.create", out, nil)
	})
	if err != nil {
		return Token{}, "", err
	}
	return out, secret, nil
}

// List returns tenantID's tokens, newest first (at most 200).
func (s *Tokens) List(ctx context.Context, tenantID int64) ([]Token, error) {
	var out []Token
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		out, err = newStore(db).tokens(ctx, tenantID)
		return err
	})
	return out, err
}

// Revoke ends token id of tenantID on behalf of userID; a token already
// revoked, or another tenant's, is ErrTokenNotFound.
func (s *Tokens) Revoke(ctx context.Context, tenantID, userID, id int64) (Token, error) {
	var out Token
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		if out, err = newStore(tx).revokeToken(ctx, tenantID, id, userID, s.clk.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, &userID, "audit_token.revoke", out, nil)
	})
	return out, err
}

// Authenticate checks a presented token against tenantID (the tenant the
// request names): unknown there (or another tenant's) is ErrTokenNotFound,
// revoked ErrTokenRevoked. A use is recorded in the trail at most once a
// minute per token, with the client's address.
func (s *Tokens) Authenticate(ctx context.Context, tenantID int64, presented, ip string) (Token, error) {
	if !ValidToken(presented) {
		return Token{}, ErrTokenMalformed
	}
	hash := sha256.Sum256([]byte(presented))
	var out Token
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		t, ok, err := st.tokenByHash(ctx, tenantID, hash[:])
		switch {
		case err != nil:
			return err
		case !ok:
			return ErrTokenNotFound
		case !t.Active():
			return ErrTokenRevoked
		}
		out = t
		used, ok, err := st.touchToken(ctx, tenantID, t.ID, s.clk.Now(), tokenUseEvery)
		if err != nil || !ok {
			// Used within the minute: nothing to record. (A revocation
			// committed since the read above also leaves it unmoved; the
			// request was admitted before it.)
			return err
		}
		out = used
		return s.record(ctx, tx, tenantID, nil, "audit_token.use", used, map[string]any{"ip": ip})
	})
	return out, err
}

// record writes a token's event: by the owner who created or revoked it,
// or (actorID nil) by the system for a use, which no member made.
func (s *Tokens) record(ctx context.Context, tx pgx.Tx, tenantID int64, actorID *int64, action string, t Token, extra map[string]any) error {
	detail := map[string]any{"name": t.Name}
	for k, v := range extra {
		detail[k] = v
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	kind := ActorUser
	if actorID == nil {
		kind = ActorSystem
	}
	_, err = s.rec.Record(ctx, tx, Event{TenantID: tenantID, ActorKind: kind, ActorID: actorID,
		Action: action, Entity: "audit_token", EntityID: strconv.FormatInt(t.ID, 10), Detail: b})
	return err
}
