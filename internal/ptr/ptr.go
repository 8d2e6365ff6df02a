// Package ptr reads the nullable columns sqlc returns as pointers.
package ptr

// Value is *p, or T's zero value when p is nil (a NULL column).
func Value[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
