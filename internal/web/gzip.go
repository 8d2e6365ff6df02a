package web

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"
)

// gzipMiddleware is echo's middleware.Gzip (MIT, © LabStack and Echo
// contributors) on github.com/klauspost/compress's gzip instead of the
// standard library's: at the fastest level it compresses a trail page in
// about half the time for an answer 3 % larger, and compressing was 40 %
// of the web process's CPU on a trail page that a browser asks for
// gzipped (docs/benchmarks.md). What it keeps from echo's: answers under
// minLength go out as they are (buffered until then); nothing written
// (an error returned before the body, a redirect) leaves the response as
// it was, so the error handler writes it plainly; Flush compresses what
// it has and sends it.
func gzipMiddleware(level, minLength int, skip func(echo.Context) bool) echo.MiddlewareFunc {
	writers := sync.Pool{New: func() any {
		w, err := gzip.NewWriterLevel(io.Discard, level)
		if err != nil {
			panic(err) // a level out of range: a programming error
		}
		return w
	}}
	buffers := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if skip(c) {
				return next(c)
			}
			res := c.Response()
			res.Header().Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
			if !strings.Contains(c.Request().Header.Get(echo.HeaderAcceptEncoding), "gzip") {
				return next(c)
			}
			zw := writers.Get().(*gzip.Writer)
			rw := res.Writer
			zw.Reset(rw)
			buf := buffers.Get().(*bytes.Buffer)
			buf.Reset()
			g := &gzipWriter{zw: zw, ResponseWriter: rw, minLength: minLength, buffer: buf}
			defer func() {
				if !g.compressing {
					// Nothing written (the error handler writes next, on
					// the response as it was) or less than minLength: the
					// held status and bytes go out as they are.
					res.Writer = rw
					if g.wroteHeader {
						rw.WriteHeader(g.code)
					}
					_, _ = buf.WriteTo(rw)
					zw.Reset(io.Discard)
				}
				_ = zw.Close()
				buffers.Put(buf)
				writers.Put(zw)
			}()
			res.Writer = g
			return next(c)
		}
	}
}

type gzipWriter struct {
	http.ResponseWriter
	zw          *gzip.Writer
	wroteHeader bool
	compressing bool // minLength reached: the header is out, the body goes through zw
	minLength   int
	buffer      *bytes.Buffer
	code        int
}

// WriteHeader holds the status until the body shows whether the answer
// is compressed.
func (w *gzipWriter) WriteHeader(code int) {
	w.Header().Del(echo.HeaderContentLength)
	w.wroteHeader = true
	w.code = code
}

func (w *gzipWriter) Write(b []byte) (int, error) {
	if w.Header().Get(echo.HeaderContentType) == "" {
		w.Header().Set(echo.HeaderContentType, http.DetectContentType(b))
	}
	if w.compressing {
		return w.zw.Write(b)
	}
	if w.buffer.Len()+len(b) < w.minLength {
		return w.buffer.Write(b)
	}
	w.start()
	if w.buffer.Len() > 0 {
		if _, err := w.zw.Write(w.buffer.Bytes()); err != nil {
			return 0, err
		}
	}
	return w.zw.Write(b)
}

// start sends the held status with the gzip encoding.
func (w *gzipWriter) start() {
	w.compressing = true
	w.Header().Set(echo.HeaderContentEncoding, "gzip")
	if w.wroteHeader {
		w.ResponseWriter.WriteHeader(w.code)
	}
}

// Flush compresses and sends what was written so far: with more to come
// of unknown length, the answer is compressed from here on.
func (w *gzipWriter) Flush() {
	if !w.compressing {
		w.start()
		_, _ = w.zw.Write(w.buffer.Bytes())
	}
	_ = w.zw.Flush()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's own writer
// (to hijack it, or set deadlines).
func (w *gzipWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
