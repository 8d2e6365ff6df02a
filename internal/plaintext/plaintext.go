// Package plaintext holds the rules for text people type that other people
// read: which characters a name may not contain, and how free text (reasons,
// details, errors) is shown so it cannot lie about itself.
package plaintext

import (
	"fmt"
	"strings"
	"unicode"
)

// Deceptive reports whether r changes how the text around it is displayed
// rather than being a character of its own: the bidirectional embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069, which can make
// "exe.txt" read "txt.exe" or reverse a reason in a confirm dialog), the
// bidi marks, control characters, and the characters that show nothing at
// all (zero-width space, non-joiner and joiner U+200B–U+200D, word joiner
// and invisible operators U+2060–U+2064, the byte-order mark U+FEFF, the
// soft hyphen, the combining grapheme joiner, the Mongolian vowel
// separator and the Hangul fillers), which make two names that look the
// same different, or one name look like another.
func Deceptive(r rune) bool {
	switch {
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	case r >= 0x200B && r <= 0x200D, r >= 0x2060 && r <= 0x2064, r == 0xFEFF, r == 0x00AD, r == 0x034F,
		r == 0x180E, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
		return true
	case unicode.IsControl(r):
		return true
	}
	return false
}

// NameProblem returns the first character a name must not contain, and
// whether there is one: names are shown in lists, titles and confirm
// dialogs, so no control, invisible or bidirectional formatting character
// is allowed in them.
func NameProblem(name string) (rune, bool) {
	for _, r := range name {
		if Deceptive(r) {
			return r, true
		}
	}
	return 0, false
}

// Visible returns s with every deceptive character except newline and tab
// replaced by a visible marker such as "⟨U+202E⟩", so free text shows what
// was typed instead of being reordered or hidden by it.
func Visible(s string) string {
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hidden(r rune) bool { return r != '\n' && r != '\t' && r != '\r' && Deceptive(r) }
