package webhook

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/keyfile"
)

// Signing secrets are stored sealed: AES-256-GCM (Go's standard library)
// under a key kept in a file outside the database, like the audit
// anchor's key, so a copy of the database (a backup, a superuser's
// SELECT) does not hand out the keys that sign a tenant's webhooks. The
// tenant id is the additional data, so a sealed secret copied into
// another tenant's row does not open.

// sealedPrefix marks a sealed secret column value.
const sealedPrefix = "jejak-sealed:v1:"

// sealKeyBytes is the sealing key's length (AES-256).
const sealKeyBytes = 32

// Sealer seals and opens endpoint signing secrets. A nil *Sealer stores
// them readable (tests that do not care, and nothing else: serve always
// has one).
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer over a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != sealKeyBytes {
		return nil, fmt.Errorf("webhook sealing key: want %d bytes, got %d", sealKeyBytes, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("webhook sealing key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("webhook sealing key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// LoadSealer reads the key file (base64 of 32 bytes), creating it with a
// fresh key, readable by its owner only, when it does not exist.
func LoadSealer(path string) (*Sealer, error) {
	raw, err := keyfile.Read(path, func() ([]byte, error) {
		key := make([]byte, sealKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		return []byte(base64.StdEncoding.EncodeToString(key) + "\n"), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read webhook sealing key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("webhook sealing key %s: not base64", path)
	}
	return NewSealer(key)
}

func sealAAD(tenantID int64) []byte {
	return []byte("jejak webhook secret tenant=" + strconv.FormatInt(tenantID, 10))
}

// seal returns the stored form of secret for tenantID's row.
func (s *Sealer) seal(tenantID int64, secret string) (string, error) {
	if s == nil || secret == "" || strings.HasPrefix(secret, sealedPrefix) {
		return secret, nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal webhook secret: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(secret), sealAAD(tenantID))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open returns the secret a stored value of tenantID's row holds; a readable one (a row not
// sealed yet) is returned as it is.
func (s *Sealer) Open(tenantID int64, stored string) (string, error) {
	if !strings.HasPrefix(stored, sealedPrefix) {
		return stored, nil
	}
	if s == nil {
		return "", errors.New("webhook secret is sealed and no sealing key is configured")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(stored, sealedPrefix))
	n := s.aead.NonceSize()
	if err != nil || len(raw) < n {
		return "", errors.New("webhook secret: sealed value is malformed")
	}
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], sealAAD(tenantID))
	if err != nil {
		return "", errors.New("webhook secret: cannot open it with this sealing key")
	}
	return string(plain), nil
}

// openPtr is open for an optional column.
func (s *Sealer) openPtr(tenantID int64, stored *string) (*string, error) {
	if stored == nil {
		return nil, nil
	}
	v, err := s.Open(tenantID, *stored)
	return &v, err
}

// SealStored seals every endpoint secret still stored readable, through the
// cross-tenant pool, and returns how many rows it sealed. Run at start; a
// row sealed meanwhile by another replica is left alone.
func SealStored(ctx context.Context, system database.Pool, s *Sealer) (int, error) {
	if s == nil {
		return 0, nil
	}
	rows, err := newStore(system).readableSecrets(ctx)
	if err != nil {
		return 0, fmt.Errorf("find readable webhook secrets: %w", err)
	}
	n := 0
	for _, r := range rows {
		sec, err := s.seal(r.TenantID, r.Secret)
		if err != nil {
			return n, err
		}
		var prev *string
		if r.PreviousSecret != nil {
			p, err := s.seal(r.TenantID, *r.PreviousSecret)
			if err != nil {
				return n, err
			}
			prev = &p
		}
		ok, err := newStore(system).sealSecret(ctx, r.TenantID, r.ID, r.Secret, sec, prev)
		if err != nil {
			return n, fmt.Errorf("seal webhook secret of endpoint %d: %w", r.ID, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}
