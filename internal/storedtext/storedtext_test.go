package storedtext_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/storedtext"
)

// TestWriteThenParse: every kind of value written into a sentence reads
// back as the same key and values; a sentence of another version reads as
// no key; a format's literal percent sign is matched, not taken as a verb.
func TestWriteThenParse(t *testing.T) {
	set := storedtext.NewSet(map[string]storedtext.Format{
		"k.count":  {English: "%d job(s) pruned"},
		"k.mixed":  {English: "worker %s fails %.0f%% after %s, %d left", Durations: map[int]bool{2: true}},
		"k.static": {English: "retention off"},
	})
	for _, tc := range []struct {
		key  string
		args []any
	}{
		{"k.count", []any{int64(-3)}},
		{"k.mixed", []any{"w 1", float64(80), 2*time.Minute + 5*time.Second, int64(7)}},
		{"k.static", nil},
	} {
		s := set.Write(tc.key, tc.args...)
		if got := set.Parse(s); got.Key != tc.key || !reflect.DeepEqual(got.Args, tc.args) {
			t.Errorf("%q read back as %+v, want %s %v", s, got, tc.key, tc.args)
		}
	}
	for _, s := range []string{"something a newer version wrote", "worker x fails 80 after 1m, 2 left", "3 job(s) pruned!"} {
		if got := set.Parse(s); got.Key != "" {
			t.Errorf("%q parsed as %+v", s, got)
		}
	}
	if got := set.English()["k.count"]; got != "%d job(s) pruned" {
		t.Errorf("English = %q", got)
	}
}
