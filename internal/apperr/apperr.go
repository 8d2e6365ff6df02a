// Package apperr defines the application's error codes. Domain packages
// return *Error values (or wrap them); the web layer maps codes to HTTP
// status in one place and shows internal errors only as "Internal error".
package apperr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Code classifies an error for callers.
type Code string

// The codes the web layer understands.
const (
	CodeInvalid   Code = "invalid"   // bad input; Fields says which
	CodeMalformed Code = "malformed" // a request no form produces (a forged cursor, an unknown action)
	CodeNotFound  Code = "not_found" // absent, or belongs to another tenant
	CodeConflict  Code = "conflict"
	CodeForbidden Code = "forbidden" // known but not allowed
	// CodeUnauthenticated: the credential presented (a bearer token) is
	// unknown or revoked.
	CodeUnauthenticated Code = "unauthenticated"
	// CodeTooMany: the caller already runs as much of this at once as it
	// may; RetryAfter says when to try again.
	CodeTooMany  Code = "too_many"
	CodeInternal Code = "internal"
)

// Error is an error with a code, a message safe to show to users, and
// optional per-field messages for forms.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]string
	// Formats holds, for a field whose message has values, the message's
	// format (its key in the language catalogs) and the values, so the web
	// layer formats it in the reader's language.
	Formats map[string]Format
	// RetryAfter is when a CodeTooMany refusal is worth retrying.
	RetryAfter time.Duration
}

// Format is a message with values: Fields holds it formatted in English.
type Format struct {
	Format string
	Args   []any
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + e.Fields[k]
	}
	return e.Message + " (" + strings.Join(parts, "; ") + ")"
}

// Invalid returns a validation error for one field.
func Invalid(field, msg string) *Error {
	return &Error{Code: CodeInvalid, Message: "invalid input", Fields: map[string]string{field: msg}}
}

// Invalidf returns a validation error for one field whose message has
// values (format's verbs filled with args).
func Invalidf(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Message: "invalid input", Fields: map[string]string{field: fmt.Sprintf(format, args...)},
		Formats: map[string]Format{field: {Format: format, Args: args}}}
}

// FormatOf returns the format and values of err's message for field, when
// it was made with Invalidf.
func FormatOf(err error, field string) (Format, bool) {
	var e *Error
	if errors.As(err, &e) {
		f, ok := e.Formats[field]
		return f, ok
	}
	return Format{}, false
}

// InvalidFields returns a validation error for several fields at once, so
// a form can show every message next to its field.
func InvalidFields(fields map[string]string) *Error {
	return &Error{Code: CodeInvalid, Message: "invalid input", Fields: fields}
}

// InvalidFormats is InvalidFields for messages of which some have values:
// each field's format (its key in the language catalogs) and values, so
// the web layer formats every message in the reader's language.
func InvalidFormats(fields map[string]Format) *Error {
	e := &Error{Code: CodeInvalid, Message: "invalid input", Fields: make(map[string]string, len(fields)), Formats: map[string]Format{}}
	for field, m := range fields {
		if len(m.Args) == 0 {
			e.Fields[field] = m.Format
			continue
		}
		e.Fields[field] = fmt.Sprintf(m.Format, m.Args...)
		e.Formats[field] = m
	}
	return e
}

// Malformed returns an error for a request that no page of ours sends; msg
// is shown to the user.
func Malformed(msg string) *Error { return &Error{Code: CodeMalformed, Message: msg} }

// Conflict returns a conflict error with a user-safe message.
func Conflict(msg string) *Error { return &Error{Code: CodeConflict, Message: msg} }

// NotFound returns a not-found error with a user-safe message.
func NotFound(msg string) *Error { return &Error{Code: CodeNotFound, Message: msg} }

// Forbidden returns a forbidden error with a user-safe message.
func Forbidden(msg string) *Error { return &Error{Code: CodeForbidden, Message: msg} }

// Unauthenticated returns an error for a refused credential with a
// user-safe message.
func Unauthenticated(msg string) *Error { return &Error{Code: CodeUnauthenticated, Message: msg} }

// TooMany returns a refusal of one more concurrent use, with a user-safe
// message and when to retry.
func TooMany(msg string, retryAfter time.Duration) *Error {
	return &Error{Code: CodeTooMany, Message: msg, RetryAfter: retryAfter}
}

// CodeOf returns the code of the first *Error in err's chain, or
// CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// FieldsOf returns the per-field messages of err, if any.
func FieldsOf(err error) map[string]string {
	var e *Error
	if errors.As(err, &e) {
		return e.Fields
	}
	return nil
}
