package job

import (
	"strings"
	"unicode/utf8"
)

// panicPrefix starts the error a recovered handler panic is stored with
// (followed by the panic value and the goroutine's stack).
const panicPrefix = "handler panic: "

// tenantErrorMax bounds the error a tenant's members see.
const tenantErrorMax = 200

// TenantError is what a tenant's members are shown of a job's error: its
// first line, at most 200 characters. A handler panic's value and stack
// describe Jejak's code, not the tenant's data, and stay with staff.
func TenantError(msg string) string {
	if strings.HasPrefix(msg, panicPrefix) {
		return "The job's handler crashed; support staff can see the details."
	}
	if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
		msg = msg[:i]
	}
	if utf8.RuneCountInString(msg) > tenantErrorMax {
		r := []rune(msg)
		msg = string(r[:tenantErrorMax-1]) + "…"
	}
	return msg
}
