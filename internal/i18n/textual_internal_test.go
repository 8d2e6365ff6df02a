package i18n

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTextualMessagesFormatAsThePrinterDoes: every message the fmt path
// takes (its verbs all a string's) comes out exactly as the Printer
// formats it, in both languages, with as many string arguments as any
// sentence passes (some with a % or a marker in them); messages with a
// number verb stay with the Printer.
func TestTextualMessagesFormatAsThePrinterDoes(t *testing.T) {
	t.Parallel()
	args := []any{"\x01", "\x02", "50% off", "Rina", ""}
	checked := 0
	for lang, msgs := range textual {
		for key, m := range msgs {
			if msg := m.format; strings.Contains(msg, "%d") {
				t.Fatalf("%s %s: a message with a number verb took the fmt path: %q", lang, key, msg)
			}
			for n := 0; n <= len(args); n++ {
				if got, want := In(lang, key, args[:n]...), printers[lang].Sprintf(key, args[:n]...); got != want {
					t.Fatalf("%s %s with %d arguments: %q, the Printer gives %q", lang, key, n, got, want)
				}
			}
			if m.fits(args[:m.reads]) {
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d messages take the fmt path", checked)
	}
	if m, ok := textual[EN]["audit.user_n"]; !ok || !m.fits([]any{"7"}) {
		t.Fatalf("audit.user_n (%%s) does not take the fmt path")
	}
	if got := In(ID, "rel.days", 1234); got != printers[ID].Sprintf("rel.days", 1234) || !strings.Contains(got, "1.234") {
		t.Fatalf("a number argument lost the language's grouping: %q", got)
	}
}

// TestDatesName: the dates built without fmt read as before.
func TestDatesName(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, time.August, 3, 14, 5, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{Date(ID, at), "3 Agu 2026"}, {Date(EN, at), "3 Aug 2026"},
		{ShortDate(ID, at), "Sen 3 Agu"}, {ShortDate(EN, at), "Mon 3 Aug"},
		{Month(EN, time.Month(13)), "month.13"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestNumberWithoutGroupsAsThePrinter: a number too small to group is
// written as the Printer writes it, in both languages; larger ones keep
// each language's grouping.
func TestNumberWithoutGroupsAsThePrinter(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{EN, ID} {
		ctx := WithLang(context.Background(), lang)
		for _, n := range []int64{-1000, -999, -1, 0, 7, 999, 1000, 1234567} {
			if got, want := Number(ctx, n), printers[lang].Sprintf("%d", n); got != want {
				t.Fatalf("%s %d: %q, the Printer gives %q", lang, n, got, want)
			}
		}
	}
	if got := Number(WithLang(context.Background(), ID), 1234); got != "1.234" {
		t.Fatalf("Indonesian 1234 = %q, want 1.234", got)
	}
}
