package plaintext_test

import (
	"testing"

	"github.com/jejakhq/jejak/internal/plaintext"
)

func TestNameProblemAndVisible(t *testing.T) {
	for _, bad := range []string{"gpj.\u202Eexe", "a\u2066b", "tab\there", "bell\a", "nul\x00", "c1\u0085",
		"Melati\u200B", "Me\u200Clati", "Me\u200Dlati", "Mel\u2060ati", "\uFEFFMelati", "Mela\u00ADti", "\u3164"} {
		if _, found := plaintext.NameProblem(bad); !found {
			t.Errorf("%q accepted as a name", bad)
		}
	}
	for _, good := range []string{"Katalog Musim Hujan", "Toko Bunga Melati — 2026", "مرحبا", "日本語"} {
		if r, found := plaintext.NameProblem(good); found {
			t.Errorf("%q refused: U+%04X", good, r)
		}
	}
	cases := map[string]string{
		"plain":                     "plain",
		"line\nbreak\ttab":          "line\nbreak\ttab",
		"refund \u202Eoot\u202C ok": "refund ⟨U+202E⟩oot⟨U+202C⟩ ok",
		"esc\x1b[31m":               "esc⟨U+001B⟩[31m",
		"iso\u2067x\u2069":          "iso⟨U+2067⟩x⟨U+2069⟩",
		"Tok\u200Bo":                "Tok⟨U+200B⟩o",
		"\uFEFFadmin\u2060":         "⟨U+FEFF⟩admin⟨U+2060⟩",
	}
	for in, want := range cases {
		if got := plaintext.Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}
