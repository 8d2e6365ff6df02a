package schedule

import "github.com/jejakhq/jejak/internal/storedtext"

// A run's summary is stored in English (schedule_runs.summary, read with
// psql and by older replicas) and shown on the dashboard by catalog key:
// each result is a key and the English format it is stored with.
const (
	resultTenants      = "schedule.result.tenants"
	resultJobsPruned   = "schedule.result.jobs_pruned"
	resultOutboxPruned = "schedule.result.outbox_pruned"
	resultRetentionOff = "schedule.result.retention_off"
)

var results = storedtext.NewSet(map[string]storedtext.Format{
	resultTenants:      {English: "%d tenant(s)"},
	resultJobsPruned:   {English: "%d finished job(s) pruned"},
	resultOutboxPruned: {English: "%d delivered message(s) pruned"},
	resultRetentionOff: {English: "retention off"},
})

// Text is a sentence for people as a catalog key and its values.
type Text = storedtext.Text

// summary is the stored English of result key with its count.
func summary(key string, n ...int64) string {
	args := make([]any, len(n))
	for i, v := range n {
		args[i] = v
	}
	return results.Write(key, args...)
}

// ParseSummary reads a stored summary back as its result key and count;
// a summary that is no known result (written by another version) gives
// an empty Text, and the dashboard shows it as stored.
func ParseSummary(s string) Text { return results.Parse(s) }
