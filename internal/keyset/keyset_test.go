package keyset_test

import (
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/keyset"
)

func TestLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{-1: keyset.DefaultLimit, 0: keyset.DefaultLimit, 1: 1, 200: 200, 201: keyset.MaxLimit, 5000: keyset.MaxLimit} {
		if got := keyset.Limit(in); got != want {
			t.Errorf("Limit(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	id := func(n *int64) int64 { return *n }
	p := keyset.Cut([]int64{9, 8, 7}, 2, id)
	if len(p.Rows) != 2 || p.Next != 8 {
		t.Fatalf("Cut with an extra row = %+v, want 2 rows and next 8", p)
	}
	p = keyset.Cut([]int64{9, 8}, 2, id)
	if len(p.Rows) != 2 || p.Next != 0 {
		t.Fatalf("Cut of a last page = %+v, want next 0", p)
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	if n, err := keyset.Cursor("before", ""); n != 0 || err != nil {
		t.Fatalf(`Cursor("") = %d, %v`, n, err)
	}
	if n, err := keyset.Cursor("before", "42"); n != 42 || err != nil {
		t.Fatalf(`Cursor("42") = %d, %v`, n, err)
	}
	for _, bad := range []string{"abc", "-1", "0", "i5", "1e3"} {
		if _, err := keyset.Cursor("before", bad); apperr.CodeOf(err) != apperr.CodeMalformed {
			t.Errorf("Cursor(%q) = %v, want a malformed error", bad, err)
		}
	}
}
