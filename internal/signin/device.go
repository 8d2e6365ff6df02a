package signin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"

	"github.com/jejakhq/jejak/internal/database"
)

// A device token is "<id>.<mac>": a random device id and
// HMAC-SHA256(key, "jejak-device-v1|" + email + "|" + id). It names the
// account without showing it (the mac only checks out for that e-mail) and
// cannot be made without the key, which only a successful sign-in uses.
// It is no credential: it only picks which throttle budget an attempt
// spends, so the owner's known browsers keep their own budget while
// strangers use up the account's.
const (
	deviceIDLen    = 22 // 16 random bytes, base64url without padding
	deviceTokenLen = deviceIDLen + 1 + 43
)

// secretKey is one key of web_secrets, read once through the system pool
// (the tenant-facing role cannot read keys).
type secretKey struct {
	db   database.Querier
	name string
	mu   sync.Mutex
	key  []byte
}

func (k *secretKey) load(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	b, err := newStore(k.db).secret(ctx, k.name)
	if err != nil {
		return nil, err
	}
	k.key = b
	return b, nil
}

func deviceMAC(key []byte, email, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("jejak-device-v1|"))
	m.Write([]byte(email))
	m.Write([]byte("|"))
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newDeviceToken returns a fresh token naming email.
func newDeviceToken(key []byte, email string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	return id + "." + deviceMAC(key, email, id)
}

// deviceID returns the device id of token when it was made for email, or
// "" (no token, a malformed one, a forged one, another account's).
func deviceID(key []byte, email, token string) string {
	if len(token) != deviceTokenLen {
		return ""
	}
	id, mac, ok := strings.Cut(token, ".")
	if !ok || len(id) != deviceIDLen {
		return ""
	}
	if !hmac.Equal([]byte(mac), []byte(deviceMAC(key, email, id))) {
		return ""
	}
	return id
}
