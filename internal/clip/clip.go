// Package clip shortens text for display, logs and event details without
// cutting a UTF-8 character in half.
package clip

import "unicode/utf8"

// Runes returns s cut to at most n characters (runes), with "…" appended
// when something was cut.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i] + "…"
}

// Bytes returns s cut to at most n bytes, backing off to the start of a
// character so the result stays valid UTF-8; for stored text whose limit is
// in bytes (error columns, response excerpts). Nothing is appended.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
