package clip_test

import (
	"testing"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/clip"
)

func TestRunes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"tidak merespons", 5, "tidak…"},
		{"héé", 2, "hé…"},
		{"日本語テキスト", 3, "日本語…"},
		{"", 0, ""},
	}
	for _, c := range cases {
		got := clip.Runes(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"héé", 2, "h"}, // "é" is two bytes: never half of it
		{"héé", 3, "hé"},
		{"日本語", 4, "日"},
		{"", 0, ""},
	}
	for _, c := range cases {
		got := clip.Bytes(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) || len(got) > c.n {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
