package mail

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// Sink is the default Mailer when no SMTP server is configured: it stores
// each message in mail_messages under the message's tenant. A message
// whose ID is already stored for that tenant is not stored again.
type Sink struct {
	db database.Beginner
}

// NewSink returns a Sink writing through db, the jejak_app pool (each
// message is written in a transaction scoped to its tenant).
func NewSink(db database.Beginner) *Sink { return &Sink{db: db} }

// Send stores m.
func (s *Sink) Send(ctx context.Context, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	err := database.InTenantTx(ctx, s.db, m.TenantID, func(tx pgx.Tx) error {
		return insertMessage(ctx, tx, m)
	})
	if err != nil {
		return fmt.Errorf("store mail %s in the dev sink: %w", m.ID, err)
	}
	return nil
}

// Stored is a message kept by the dev sink.
type Stored struct {
	ID        int64
	MessageID string
	From      string
	To        []string
	Subject   string
	Body      string
	CreatedAt time.Time
}
