// Package mail sends Jejak's e-mail through a Mailer: SMTP in production,
// or by default a dev sink that stores every message in the mail_messages
// table (tenant-owned, row-level security) so the dashboard can show what
// would have been sent. It also ships the email.weekly-report job kind.
package mail

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
)

// Message is one plain-text e-mail sent on behalf of a tenant.
type Message struct {
	TenantID int64
	// ID is the Message-ID (without angle brackets). Built from the job
	// that sends it, so a redelivered job carries the same ID: the sink
	// stores it once and receivers can drop the duplicate.
	ID      string
	From    string
	To      []string
	Subject string
	Text    string
	// Date is the Date header; nil leaves it to the sink's database clock
	// or the receiving SMTP server.
	Date *time.Time
}

// Mailer delivers messages. An error wrapping ErrInvalidMessage or
// ErrRejected will not succeed on retry; any other error (server down,
// timeout) may.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// Errors that tell a caller not to retry.
var (
	// ErrInvalidMessage: the message itself is malformed (bad address,
	// header injection, missing field).
	ErrInvalidMessage = &apperr.Error{Code: apperr.CodeInvalid, Message: "mail: invalid message"}
	// ErrRejected: the SMTP server refused the message permanently (5xx).
	ErrRejected = &apperr.Error{Code: apperr.CodeConflict, Message: "mail: rejected by server"}
)

// Validate checks a message before it is sent or stored.
func (m Message) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
	}
	if m.TenantID <= 0 {
		return bad("tenant id must be positive")
	}
	if m.ID == "" || len(m.ID) > 300 || strings.ContainsAny(m.ID, "\r\n<> ") {
		return bad("message id %q must be 1-300 characters without spaces, brackets or line breaks", m.ID)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return bad("subject contains a line break")
	}
	if _, err := mail.ParseAddress(m.From); err != nil {
		return bad("from address %q: %v", m.From, err)
	}
	if len(m.To) == 0 {
		return bad("no recipients")
	}
	for _, to := range m.To {
		if err := ValidateAddress(to); err != nil {
			return err
		}
	}
	return nil
}

// ValidateAddress checks a bare recipient address such as budi@example.com.
func ValidateAddress(addr string) error {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || a.Name != "" {
		return fmt.Errorf("%w: recipient %q is not a bare e-mail address", ErrInvalidMessage, addr)
	}
	return nil
}

// EnvSMTPURL names the variable that switches mail from the dev sink to an
// SMTP server: smtp://[user:password@]host[:port] (STARTTLS when offered)
// or smtps://... (TLS from the first byte).
const EnvSMTPURL = "JEJAK_SMTP_URL"

// FromEnv returns an SMTP mailer when JEJAK_SMTP_URL is set, and otherwise
// the dev sink writing to db (the jejak_app pool).
func FromEnv(getenv func(string) string, db database.Beginner) (Mailer, error) {
	if raw := getenv(EnvSMTPURL); raw != "" {
		s, err := NewSMTP(raw)
		if err != nil {
			return nil, fmt.Errorf("configure mail from %s: %w", EnvSMTPURL, err)
		}
		return s, nil
	}
	return NewSink(db), nil
}
