package web

import (
	"context"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// formBodyLimit bounds every request body. Jejak's forms are a few fields
// of text; nothing uploads files.
const formBodyLimit = 64 << 10

// Timeouts are the HTTP server's limits on one connection.
type Timeouts struct {
	ReadHeader time.Duration // headers must arrive within this
	Read       time.Duration // the whole request, body included
	Write      time.Duration // the whole answer (streamed exports extend their own deadline)
	Idle       time.Duration // a keep-alive connection waiting for its next request
	// Request bounds a whole request's work, waiting for a pool
	// connection included, so requests queue for a busy pool only so long
	// and then answer 503 instead of piling up. Streamed exports are
	// bounded per batch instead.
	Request time.Duration
	// StreamWrite is how long one write of a streamed answer (an export)
	// may take: the deadline moves forward after each write, so a long
	// export to a reading client goes on, and a client that stops reading
	// is cut off.
	StreamWrite time.Duration
}

// DefaultTimeouts are the production values.
var DefaultTimeouts = Timeouts{
	ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second,
	Idle: 2 * time.Minute, Request: 20 * time.Second, StreamWrite: 30 * time.Second,
}

// NewHTTPServer returns the server that serves h with t's limits.
func NewHTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle, MaxHeaderBytes: 64 << 10,
	}
}

// guardInput runs before sessions and CSRF, so abusive input costs no
// database work: it bounds the body (413 beyond formBodyLimit, whether the
// client announced the length or not), parses the form once, and refuses
// text that PostgreSQL cannot store or that is not text at all (a NUL byte
// or invalid UTF-8 in the path, a query parameter or a form field) with
// 400, instead of letting it reach a query and fail there as a 500.
func guardInput(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > formBodyLimit {
			return tooLarge()
		}
		r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, formBodyLimit)
		if !storable(r.URL.Path) {
			return badText()
		}
		var err error
		if ct, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); ct == echo.MIMEMultipartForm {
			// Memory bound = body bound: no part ever spills to disk.
			err = r.ParseMultipartForm(formBodyLimit)
		} else {
			err = r.ParseForm()
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return tooLarge()
		case err != nil && !errors.Is(err, http.ErrNotMultipart):
			return echo.NewHTTPError(http.StatusBadRequest, "The request's form or query string is malformed.")
		}
		if r.MultipartForm != nil && len(r.MultipartForm.File) > 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "Files are not accepted here.")
		}
		for k, vs := range r.Form {
			if !storable(k) {
				return badText()
			}
			for _, v := range vs {
				if !storable(v) {
					return badText()
				}
			}
		}
		return next(c)
	}
}

// storable reports whether s is valid UTF-8 without NUL, the text a
// PostgreSQL text column accepts.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func tooLarge() error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "The request is too large.")
}

func badText() error {
	return echo.NewHTTPError(http.StatusBadRequest, "The request contains text that cannot be stored (a NUL byte or invalid UTF-8).")
}

// ctxNoDeadline keeps a request's context from before requestDeadline, for
// streamed answers.
const ctxNoDeadline = "ctx_no_deadline"

// requestDeadline gives the request's context the Request deadline.
func (s *Server) requestDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.timeouts.Request <= 0 {
			return next(c)
		}
		r := c.Request()
		c.Set(ctxNoDeadline, r.Context())
		ctx, cancel := context.WithTimeout(r.Context(), s.timeouts.Request)
		defer cancel()
		c.SetRequest(r.WithContext(ctx))
		// Answer an error here, while the context is live: the session
		// is saved as the answer is written, with this context.
		if err := next(c); err != nil {
			c.Error(err)
		}
		return nil
	}
}

// streamDeadline lets a streamed answer run past the server's WriteTimeout
// and the request deadline while the client keeps reading: every write
// pushes the connection's write deadline StreamWrite ahead (the export
// bounds each of its database batches itself).
func (s *Server) streamDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if parent, ok := c.Get(ctxNoDeadline).(context.Context); ok {
			// Keep what later middleware added (viewer, CSRF token, trace).
			c.SetRequest(c.Request().WithContext(withoutDeadline{Context: c.Request().Context(), parent: parent}))
		}
		res := c.Response()
		rc := http.NewResponseController(res.Writer)
		res.Writer = &deadlineWriter{ResponseWriter: res.Writer, rc: rc, each: s.timeouts.StreamWrite}
		_ = rc.SetWriteDeadline(time.Now().Add(s.timeouts.StreamWrite))
		return next(c)
	}
}

// withoutDeadline has the values of Context and the deadline and
// cancellation of parent (the request before requestDeadline: it still ends
// when the client goes away).
type withoutDeadline struct {
	context.Context
	parent context.Context
}

func (w withoutDeadline) Deadline() (time.Time, bool) { return w.parent.Deadline() }
func (w withoutDeadline) Done() <-chan struct{}       { return w.parent.Done() }
func (w withoutDeadline) Err() error                  { return w.parent.Err() }

type deadlineWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	each time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.each))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() { _ = w.rc.Flush() }

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// filesOnly serves the files of an fs.FS and nothing else: a directory
// answers 404 instead of a listing.
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := file.Stat()
	if err != nil || st.IsDir() {
		file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}
