package components

import (
	"context"
	"io"
	"sync"

	"github.com/a-h/templ"
)

// Written is the component whose bytes f appends: the form of the few
// components written out by hand because a page repeats them many times
// and templ's per-attribute resolution cost more than the rest of the page.
// f gets a pooled buffer (a page of rows is tens of kB, grown afresh for
// every render otherwise).
func Written(f func(ctx context.Context, b []byte) ([]byte, error)) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		buf := byteBufs.Get().(*[]byte)
		defer byteBufs.Put(buf)
		b, err := f(ctx, (*buf)[:0])
		*buf = b
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}

// AppendRendered appends what c renders: a templ component inside a
// hand-written one.
func AppendRendered(ctx context.Context, b []byte, c templ.Component) ([]byte, error) {
	w := appendWriter{b}
	err := c.Render(ctx, &w)
	return w.b, err
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var byteBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// AppendEscaped appends s escaped as templ.EscapeString (html.EscapeString)
// escapes it, for text and attribute values alike.
func AppendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '&':
			esc = "&amp;"
		case '\'':
			esc = "&#39;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '"':
			esc = "&#34;"
		default:
			continue
		}
		b = append(append(b, s[last:i]...), esc...)
		last = i + 1
	}
	return append(b, s[last:]...)
}
