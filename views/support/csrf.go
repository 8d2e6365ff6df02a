package support

import (
	"context"

	"github.com/jejakhq/jejak/internal/reqctx"
)

func csrf(ctx context.Context) string { return reqctx.CSRF(ctx) }
