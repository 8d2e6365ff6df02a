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
