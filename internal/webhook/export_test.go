package webhook

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// HandleBatch is handleBatch for tests: one batch as Run would take it.
func (f *Fanout) HandleBatch(ctx context.Context, msgs []jetstream.Msg) {
	f.handleBatch(ctx, msgs, f.logger())
}
