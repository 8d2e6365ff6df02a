package web

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/plaintext"
)

// visibleHTML makes every direction-override and control character in a
// rendered page visible (plaintext.Visible), wherever the text came from:
// a reason, an audit detail, a job error, an attribute such as hx-confirm.
// Jejak's own templates contain none, so the page is otherwise unchanged;
// doing it here, once, covers every page and partial.
func visibleHTML(page []byte) []byte {
	i := firstHidden(page)
	if i < 0 {
		return page
	}
	out := make([]byte, 0, len(page)+32)
	out = append(out, page[:i]...)
	rest := page[i:]
	for len(rest) > 0 {
		j := firstHidden(rest)
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

// asciiHidden is hiddenRune for every ASCII byte.
var asciiHidden = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = hiddenRune(rune(c))
	}
	return t
}()

// firstHidden is bytes.IndexFunc(b, hiddenRune) for a page that is almost
// all ASCII: it decodes only the bytes outside ASCII (a rune-by-rune call
// of hiddenRune over every byte of every page cost a tenth of the web
// process's CPU on the trail), and it passes over eight printable ASCII
// bytes at a time (byte by byte, the scan was still a twentieth).
func firstHidden(b []byte) int {
	for i := 0; i < len(b); {
		if i+8 <= len(b) && printableWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
			continue
		}
		if c := b[i]; c < utf8.RuneSelf {
			if asciiHidden[c] {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if hiddenRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// printableWord reports whether all eight bytes of w are printable ASCII
// (0x20–0x7e), none hidden: no byte below 0x20, none with the high bit
// (outside ASCII) and none equal to 0x7f (DEL). A word with a tab or a
// newline is not, and is scanned byte by byte.
func printableWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - 0x20*ones) &^ w & highs // some byte < 0x20
	del := w ^ 0x7f*ones
	del = (del - ones) &^ del & highs // some byte == 0x7f
	return (below | del | w&highs) == 0
}
