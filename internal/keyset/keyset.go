// Package keyset is the one shape of a paged list in Jejak: rows newest
// first, each page continuing below the last row's key (an id or a
// sequence number), never OFFSET, so every page costs the same however deep
// the reader goes.
package keyset

import (
	"strconv"

	"github.com/jejakhq/jejak/internal/apperr"
)

// DefaultLimit is a page's size when the caller asks for none.
const DefaultLimit = 50

// MaxLimit bounds every page of every list (jobs, dead letters, audit
// events): a page is one indexed range read, and 200 rows is as much as a
// person reads at once while keeping each read a few milliseconds at
// millions of rows.
const MaxLimit = 200

// Limit returns n bounded to (0, MaxLimit]; n <= 0 means DefaultLimit.
func Limit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// Page is one page of rows. Next is the key to pass as the next page's
// cursor; 0 on the last page.
type Page[T any] struct {
	Rows []T
	Next int64
}

// Cut turns rows read with a limit of limit+1 into a page: the extra row,
// when present, only says that another page exists and is dropped; Next is
// then the key of the page's last row.
func Cut[T any](rows []T, limit int, key func(*T) int64) Page[T] {
	if len(rows) <= limit {
		return Page[T]{Rows: rows}
	}
	rows = rows[:limit]
	return Page[T]{Rows: rows, Next: key(&rows[limit-1])}
}

// Cursor reads a page cursor from a query parameter named name: "" is the
// first page (0); anything but a positive integer is malformed (links we
// write never hold one).
func Cursor(name, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, apperr.Malformed("The " + name + " cursor is not valid; go back to the newest entries.")
	}
	return n, nil
}

// Format writes a cursor for a link.
func Format(n int64) string { return strconv.FormatInt(n, 10) }
