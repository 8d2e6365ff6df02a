package components

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/a-h/templ"
)

// Memo keeps the bytes of rendered fragments under keys that name
// everything the bytes depend on, for fragments many requests render from
// the same inputs (charts of a cached snapshot, a tenant's 30 days). It
// holds at most memoSize entries: when full it starts again, which costs
// one render per fragment in use, never a stale one.
type Memo struct {
	mu sync.Mutex
	m  map[string][]byte
}

const memoSize = 512

// Fragments is the memo the pages' charts share; their keys begin with
// what they are, so two kinds of fragment cannot meet under one key.
var Fragments Memo

// Component writes the bytes kept under key, or renders build()'s
// component, keeps its bytes and writes them. build runs only on a miss.
// A failed render is written nowhere and kept nowhere.
func (m *Memo) Component(key string, build func() templ.Component) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		if b, ok := m.get(key); ok {
			_, err := w.Write(b)
			return err
		}
		var buf bytes.Buffer
		if err := build().Render(ctx, &buf); err != nil {
			return err
		}
		m.put(key, buf.Bytes())
		_, err := w.Write(buf.Bytes())
		return err
	})
}

func (m *Memo) get(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.m[key]
	return b, ok
}

func (m *Memo) put(key string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= memoSize {
		m.m = make(map[string][]byte, memoSize)
	}
	m.m[key] = b
}
