package components

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/a-h/templ"
)

// Memo keeps the bytes of rendered fragments that many requests render
// from the same inputs (the charts of a cached snapshot, a tenant's 30
// days). A fragment has a slot (what it is and for whom: the chart, its
// language and zone, its tenant) and inputs (the figures it draws); the
// slot keeps the bytes of its last inputs only, so figures that move
// replace their fragment rather than pile up beside it. Slot and inputs
// together must name everything the bytes depend on. At most memoSize
// slots are kept: when full the memo starts again, which costs one render
// per fragment in use, never a stale one.
type Memo struct {
	mu sync.Mutex
	m  map[string]memoEntry
}

type memoEntry struct {
	inputs string
	bytes  []byte
}

const memoSize = 512

// Fragments is the memo the pages' charts share; their slots begin with
// what they are, so two kinds of fragment cannot meet in one slot.
var Fragments Memo

// Component writes the bytes kept in slot for inputs, or renders build()'s
// component, keeps its bytes and writes them. build runs only on a miss.
// A failed render is written nowhere and kept nowhere.
func (m *Memo) Component(slot, inputs string, build func() templ.Component) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		if b, ok := m.get(slot, inputs); ok {
			_, err := w.Write(b)
			return err
		}
		var buf bytes.Buffer
		if err := build().Render(ctx, &buf); err != nil {
			return err
		}
		m.put(slot, inputs, buf.Bytes())
		_, err := w.Write(buf.Bytes())
		return err
	})
}

func (m *Memo) get(slot, inputs string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[slot]
	return e.bytes, ok && e.inputs == inputs
}

func (m *Memo) put(slot, inputs string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, kept := m.m[slot]; m.m == nil || !kept && len(m.m) >= memoSize {
		m.m = make(map[string]memoEntry, memoSize)
	}
	m.m[slot] = memoEntry{inputs: inputs, bytes: b}
}
