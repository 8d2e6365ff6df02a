package web

import (
	"bytes"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/plaintext"
)

// visibleHTML makes every direction-override and control character in a
// rendered page visible (plaintext.Visible), wherever the text came from:
// a reason, an audit detail, a job error, an attribute such as hx-confirm.
// Jejak's own templates contain none, so the page is otherwise unchanged;
// doing it here, once, covers every page and partial.
func visibleHTML(page []byte) []byte {
	i := bytes.IndexFunc(page, hiddenRune)
	if i < 0 {
		return page
	}
	out := make([]byte, 0, len(page)+32)
	out = append(out, page[:i]...)
	rest := page[i:]
	for len(rest) > 0 {
		j := bytes.IndexFunc(rest, hiddenRune)
		if j < 0 {
			out = append(out, rest...)
			break
		}
		out = append(out, rest[:j]...)
		r, size := utf8.DecodeRune(rest[j:])
		out = append(out, plaintext.Visible(string(r))...)
		rest = rest[j+size:]
	}
	return out
}

func hiddenRune(r rune) bool { return r != '\n' && r != '\t' && r != '\r' && plaintext.Deceptive(r) }
