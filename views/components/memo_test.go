package components

import (
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/a-h/templ"
)

// TestMemoKeepsOneFragmentPerSlot: a slot serves its bytes only for the
// inputs they were rendered from; new inputs replace them in the slot
// (moving figures do not pile up), another slot keeps its own, and
// memoSize slots bound the memo.
func TestMemoKeepsOneFragmentPerSlot(t *testing.T) {
	t.Parallel()
	var m Memo
	renders := 0
	text := func(s string) func() templ.Component {
		return func() templ.Component {
			return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
				renders++
				_, err := io.WriteString(w, s)
				return err
			})
		}
	}
	show := func(slot, inputs string) string {
		t.Helper()
		got := renderString(t, context.Background(), m.Component(slot, inputs, text(slot+"="+inputs)).Render)
		if want := slot + "=" + inputs; got != want {
			t.Fatalf("slot %s, inputs %s: wrote %q, want %q", slot, inputs, got, want)
		}
		return got
	}
	show("a", "1")
	show("b", "1")
	show("a", "1")
	show("b", "1")
	if renders != 2 {
		t.Fatalf("%d renders for two slots read twice each, want 2", renders)
	}
	for i := range 100 {
		show("a", strconv.Itoa(i+2))
	}
	if len(m.m) != 2 {
		t.Fatalf("slot a's moving inputs left %d slots, want 2", len(m.m))
	}
	show("b", "1")
	if renders != 102 {
		t.Fatalf("slot b rendered again after slot a moved: %d renders", renders)
	}
	for i := range 2 * memoSize {
		show("s"+strconv.Itoa(i), "x")
		if len(m.m) > memoSize {
			t.Fatalf("%d slots kept, over %d", len(m.m), memoSize)
		}
	}
}
