package schedule

import "fmt"

// A run's summary is stored in English (schedule_runs.summary, read with
// psql and by older replicas) and shown on the dashboard by catalog key:
// each result is a key and the English format it is stored with.
const (
	resultTenants      = "schedule.result.tenants"
	resultJobsPruned   = "schedule.result.jobs_pruned"
	resultOutboxPruned = "schedule.result.outbox_pruned"
	resultRetentionOff = "schedule.result.retention_off"
)

var resultFormats = map[string]string{
	resultTenants:      "%d tenant(s)",
	resultJobsPruned:   "%d finished job(s) pruned",
	resultOutboxPruned: "%d delivered message(s) pruned",
	resultRetentionOff: "retention off",
}

// Text is a sentence for people as a catalog key and its values, which
// the web layer formats in the reader's language.
type Text struct {
	Key  string
	Args []any
}

// summary is the stored English of result key with its count.
func summary(key string, n ...int64) string {
	args := make([]any, len(n))
	for i, v := range n {
		args[i] = v
	}
	return fmt.Sprintf(resultFormats[key], args...)
}

// ParseSummary reads a stored summary back as its result key and count;
// a summary that is no known result (written by another version) gives
// an empty Text, and the dashboard shows it as stored.
func ParseSummary(s string) Text {
	for key, format := range resultFormats {
		if format == s {
			return Text{Key: key}
		}
		var n int64
		if _, err := fmt.Sscanf(s, format, &n); err == nil && fmt.Sprintf(format, n) == s {
			return Text{Key: key, Args: []any{n}}
		}
	}
	return Text{}
}
