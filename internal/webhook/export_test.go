package webhook

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// HandleBatch is handleBatch for tests: one batch as Run would take it.
func (f *Fanout) HandleBatch(ctx context.Context, msgs []jetstream.Msg) {
	f.handleBatch(ctx, msgs, f.logger())
}

// Seal is the sealer's seal, for tests that compare two sealers' keys.
func (s *Sealer) Seal(tenantID int64, secret string) (string, error) { return s.seal(tenantID, secret) }
