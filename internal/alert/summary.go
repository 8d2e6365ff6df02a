package alert

import "github.com/jejakhq/jejak/internal/storedtext"

// A summary is stored in English (alert states and transitions, the staff
// webhook's payload, the log) and shown on the dashboard by catalog key:
// each summary is a key, the English format it is written with, and the
// kinds of its values, so ParseSummary can read a stored one back.
const (
	sumDead        = "alert.sum.dead"
	sumNoOutbox    = "alert.sum.no_outbox"
	sumOutboxLag   = "alert.sum.outbox_lag"
	sumNoneDue     = "alert.sum.none_due"
	sumDueFlowing  = "alert.sum.due_flowing"
	sumDueStalled  = "alert.sum.due_stalled"
	sumExpired     = "alert.sum.expired"
	sumNoPrincipal = "alert.sum.no_principal"
	sumPrincipal   = "alert.sum.principal"
	sumMissing     = "alert.sum.missing"
	sumFewWorkers  = "alert.sum.few_workers"
	sumWorker      = "alert.sum.worker"
	sumNoWorker    = "alert.sum.no_worker"
	sumNoPaused    = "alert.sum.no_paused"
	sumPaused      = "alert.sum.paused"
)

var summaries = storedtext.NewSet(map[string]storedtext.Format{
	sumDead:        {English: "%d jobs dead-lettered in the last 10 minutes"},
	sumNoOutbox:    {English: "no outbox wired"},
	sumOutboxLag:   {English: "oldest unpublished message waited %s", Durations: map[int]bool{0: true}},
	sumNoneDue:     {English: "no due job waiting"},
	sumDueFlowing:  {English: "%d due jobs waiting, %d attempts finished in 5 minutes"},
	sumDueStalled:  {English: "%d due jobs waiting and no attempt finished in 5 minutes"},
	sumExpired:     {English: "%d jobs expired in the last 10 minutes"},
	sumNoPrincipal: {English: "no principal above 100 enqueues in 10 minutes"},
	sumPrincipal:   {English: "user %d of tenant %d enqueued %d jobs in 10 minutes (%.0f× its daily average)"},
	sumMissing:     {English: "%d jobs without a requesting user in the last 10 minutes"},
	sumFewWorkers:  {English: "fewer than two busy workers to compare"},
	sumWorker:      {English: "worker %s fails %.0f%% of attempts, peers' median %.0f%%"},
	sumNoWorker:    {English: "no worker with 10 failures in 10 minutes"},
	sumNoPaused:    {English: "no kind paused automatically"},
	sumPaused:      {English: "paused automatically: %s"},
})

// summary writes summary key's English with its values.
func summary(key string, args ...any) string { return summaries.Write(key, args...) }

// Text is a sentence for people as a catalog key and its values.
type Text = storedtext.Text

// ParseSummary reads a stored summary back as its catalog key and values;
// one that is no known summary (written by another version) gives an
// empty Text, shown as stored.
func ParseSummary(s string) Text { return summaries.Parse(s) }

// Catalog keys of a rule's texts; the Rule's own fields are the English.
func (r Rule) TitleKey() string       { return "alert." + r.Name + ".title" }
func (r Rule) DescriptionKey() string { return "alert." + r.Name + ".desc" }
func (r Rule) RunbookKey() string     { return "alert." + r.Name + ".runbook" }
