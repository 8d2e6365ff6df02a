package observe

import (
	"context"

	"github.com/jejakhq/jejak/internal/i18n"
)

// num prints a count the reader's way (1.234 / 1,234).
func num(ctx context.Context, n int) string { return i18n.Number(ctx, int64(n)) }

// rowTestID marks job lines apart so tests can list a trace's jobs.
func rowTestID(r IncidentRow) string {
	if r.Kind == "job" {
		return "trace-job"
	}
	return "incident-row"
}
