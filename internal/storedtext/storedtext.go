// Package storedtext keeps sentences that are stored in English (in rows
// read with psql, in webhook payloads, in logs) readable in any language:
// each sentence is a catalog key with the English format it is written
// with, so a stored one can be read back as its key and values and shown
// through the reader's catalog.
package storedtext

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Text is a sentence for people as a catalog key and its values, which
// the web layer formats in the reader's language.
type Text struct {
	Key  string
	Args []any
}

// Format is one sentence's English. Its verbs are %d (an int64), %s (a
// string, or a time.Duration written by its String when Durations marks
// that value) and %.0f (a float64).
type Format struct {
	English string
	// Durations marks, by position among the values, the %s values that
	// are durations.
	Durations map[int]bool
}

// Set is a table of sentences by catalog key.
type Set struct {
	formats map[string]*compiled
}

type compiled struct {
	Format
	re    *regexp.Regexp
	verbs []string
}

var verb = regexp.MustCompile(`%%|%d|%s|%\.0f`)

// NewSet compiles the sentences; it panics on a format it cannot read back,
// as the tables are fixed in the code.
func NewSet(formats map[string]Format) *Set {
	s := &Set{formats: make(map[string]*compiled, len(formats))}
	for key, f := range formats {
		c := &compiled{Format: f}
		var re strings.Builder
		re.WriteString("^")
		last := 0
		for _, m := range verb.FindAllStringIndex(f.English, -1) {
			re.WriteString(regexp.QuoteMeta(f.English[last:m[0]]))
			switch v := f.English[m[0]:m[1]]; v {
			case "%%":
				re.WriteString("%")
			case "%s":
				re.WriteString("(.+?)")
				c.verbs = append(c.verbs, v)
			default:
				re.WriteString(`(-?\d+)`)
				c.verbs = append(c.verbs, v)
			}
			last = m[1]
		}
		re.WriteString(regexp.QuoteMeta(f.English[last:]) + "$")
		c.re = regexp.MustCompile(re.String())
		s.formats[key] = c
	}
	return s
}

// Write is sentence key's English with its values.
func (s *Set) Write(key string, args ...any) string {
	return fmt.Sprintf(s.formats[key].English, args...)
}

// English returns each key's English format.
func (s *Set) English() map[string]string {
	out := make(map[string]string, len(s.formats))
	for k, c := range s.formats {
		out[k] = c.English
	}
	return out
}

// Parse reads a stored sentence back as its key and values (int64,
// float64, string, time.Duration); one that is no known sentence (written
// by another version) gives an empty Text, to be shown as stored.
func (s *Set) Parse(str string) Text {
	for key, c := range s.formats {
		m := c.re.FindStringSubmatch(str)
		if m == nil {
			continue
		}
		var args []any // nil for a sentence without values
		if len(c.verbs) > 0 {
			args = make([]any, len(c.verbs))
		}
		ok := true
		for i, v := range c.verbs {
			switch {
			case v == "%s" && c.Durations[i]:
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
		if ok && fmt.Sprintf(c.English, args...) == str {
			return Text{Key: key, Args: args}
		}
	}
	return Text{}
}
