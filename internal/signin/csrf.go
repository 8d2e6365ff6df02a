package signin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/jejakhq/jejak/internal/database"
)

// CSRFSigner makes and checks the CSRF token of a visitor without a
// session: the token is an HMAC of a random nonce that the browser keeps in
// a cookie, so nothing is stored per visitor (a page view writes no row)
// and a token is only valid together with that browser's cookie. Every
// replica reads the same key, created once by a migration.
type CSRFSigner struct {
	key secretKey
}

// NewCSRFSigner reads its key through db (the system pool: the
// tenant-facing role cannot read keys) on first use.
func NewCSRFSigner(db database.Querier) *CSRFSigner {
	return &CSRFSigner{key: secretKey{db: db, name: "csrf"}}
}

// NewNonce returns a fresh random nonce for the visitor's cookie.
func NewNonce() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Token returns the token that goes with nonce.
func (s *CSRFSigner) Token(ctx context.Context, nonce string) (string, error) {
	key, err := s.key.load(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("jejak-csrf-v1|"))
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}
