package web

import (
	"bytes"
	"testing"
)

// TestFirstHiddenMatchesIndexFunc: the ASCII fast path finds exactly what
// a rune-by-rune scan finds, for ASCII controls, C1 controls, direction
// marks, invalid UTF-8 and text without any.
func TestFirstHiddenMatchesIndexFunc(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "<p>plain page\n\twith tabs\r\n</p>", "bell\a", "del\x7f", "esc\x1b[31m",
		"Mélati ☕ ok", "c1 \u0085 next", "rlo \u202e x", "isolate \u2066", "arabic mark \u061c",
		"bad \xff\xfe utf8", "truncated \xe2\x80", "lrm\u200e", "late " + string(bytes.Repeat([]byte("a"), 5000)) + "\u202a",
		"01234567\x7f", "0123456789abcde\x00", "0123456789abcdef~ \x1f", "0123456789abcdef\u00ad",
	} {
		if got, want := firstHidden([]byte(s)), bytes.IndexFunc([]byte(s), hiddenRune); got != want {
			t.Errorf("%q: firstHidden %d, IndexFunc %d", s, got, want)
		}
	}
}

// TestFirstHiddenEveryByteAtEveryOffset: the eight-bytes-at-a-time pass
// misses no hidden byte, whichever byte value it is and wherever in a word
// it falls.
func TestFirstHiddenEveryByteAtEveryOffset(t *testing.T) {
	t.Parallel()
	page := bytes.Repeat([]byte("<p>ok</p>"), 4)
	for c := 0; c < 256; c++ {
		for at := 0; at < 17; at++ {
			b := append([]byte(nil), page...)
			b[at] = byte(c)
			if got, want := firstHidden(b), bytes.IndexFunc(b, hiddenRune); got != want {
				t.Fatalf("byte %#x at %d: firstHidden %d, IndexFunc %d", c, at, got, want)
			}
		}
	}
}
