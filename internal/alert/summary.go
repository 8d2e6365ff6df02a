package alert

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

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

// summaryFormat is a summary's English format; its verbs are %d (an
// int64), %s (a string, or a time.Duration written by its String) and
// %.0f (a float64).
type summaryFormat struct {
	format string
	re     *regexp.Regexp
	verbs  []string
	// duration marks the %s values that are durations.
	duration map[int]bool
}

var summaryFormats = map[string]*summaryFormat{}

func init() {
	for key, f := range map[string]struct {
		format   string
		duration map[int]bool
	}{
		sumDead:        {format: "%d jobs dead-lettered in the last 10 minutes"},
		sumNoOutbox:    {format: "no outbox wired"},
		sumOutboxLag:   {format: "oldest unpublished message waited %s", duration: map[int]bool{0: true}},
		sumNoneDue:     {format: "no due job waiting"},
		sumDueFlowing:  {format: "%d due jobs waiting, %d attempts finished in 5 minutes"},
		sumDueStalled:  {format: "%d due jobs waiting and no attempt finished in 5 minutes"},
		sumExpired:     {format: "%d jobs expired in the last 10 minutes"},
		sumNoPrincipal: {format: "no principal above 100 enqueues in 10 minutes"},
		sumPrincipal:   {format: "user %d of tenant %d enqueued %d jobs in 10 minutes (%.0f× its daily average)"},
		sumMissing:     {format: "%d jobs without a requesting user in the last 10 minutes"},
		sumFewWorkers:  {format: "fewer than two busy workers to compare"},
		sumWorker:      {format: "worker %s fails %.0f%% of attempts, peers' median %.0f%%"},
		sumNoWorker:    {format: "no worker with 10 failures in 10 minutes"},
		sumNoPaused:    {format: "no kind paused automatically"},
		sumPaused:      {format: "paused automatically: %s"},
	} {
		summaryFormats[key] = compileSummary(f.format, f.duration)
	}
}

var summaryVerb = regexp.MustCompile(`%%|%d|%s|%\.0f`)

func compileSummary(format string, duration map[int]bool) *summaryFormat {
	sf := &summaryFormat{format: format, duration: duration}
	var re strings.Builder
	re.WriteString("^")
	last := 0
	for _, m := range summaryVerb.FindAllStringIndex(format, -1) {
		re.WriteString(regexp.QuoteMeta(format[last:m[0]]))
		switch v := format[m[0]:m[1]]; v {
		case "%%":
			re.WriteString("%")
		case "%s":
			re.WriteString("(.+?)")
			sf.verbs = append(sf.verbs, v)
		default:
			re.WriteString(`(-?\d+)`)
			sf.verbs = append(sf.verbs, v)
		}
		last = m[1]
	}
	re.WriteString(regexp.QuoteMeta(format[last:]) + "$")
	sf.re = regexp.MustCompile(re.String())
	return sf
}

// summary writes summary key's English with its values.
func summary(key string, args ...any) string {
	return fmt.Sprintf(summaryFormats[key].format, args...)
}

// Text is a sentence for people as a catalog key and its values, which
// the web layer formats in the reader's language.
type Text struct {
	Key  string
	Args []any
}

// ParseSummary reads a stored summary back as its catalog key and values
// (int64, float64, string, time.Duration); a summary that is no known one
// (written by another version) gives an empty Text, shown as stored.
func ParseSummary(s string) Text {
	for key, sf := range summaryFormats {
		m := sf.re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		args := make([]any, len(sf.verbs))
		ok := true
		for i, v := range sf.verbs {
			switch {
			case v == "%s" && sf.duration[i]:
				d, err := time.ParseDuration(m[i+1])
				ok, args[i] = ok && err == nil, d
			case v == "%s":
				args[i] = m[i+1]
			case v == "%d":
				n, err := strconv.ParseInt(m[i+1], 10, 64)
				ok, args[i] = ok && err == nil, n
			default:
				f, err := strconv.ParseFloat(m[i+1], 64)
				ok, args[i] = ok && err == nil, f
			}
		}
		if ok && fmt.Sprintf(sf.format, args...) == s {
			return Text{Key: key, Args: args}
		}
	}
	return Text{}
}

// Catalog keys of a rule's texts; the Rule's own fields are the English.
func (r Rule) TitleKey() string       { return "alert." + r.Name + ".title" }
func (r Rule) DescriptionKey() string { return "alert." + r.Name + ".desc" }
func (r Rule) RunbookKey() string     { return "alert." + r.Name + ".runbook" }
