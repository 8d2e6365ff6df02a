package job

import (
	"strings"
	"testing"
)

func TestTenantError(t *testing.T) {
	long := strings.Repeat("é", 300)
	cases := map[string]string{
		"smtp 550 mailbox unavailable":                                 "smtp 550 mailbox unavailable",
		"dial tcp: refused\nat mail.go:12":                             "dial tcp: refused",
		panicPrefix + "runtime error: nil map\ngoroutine 7 [running]:": "The job's handler crashed; support staff can see the details.",
		"": "",
	}
	for in, want := range cases {
		if got := TenantError(in); got != want {
			t.Errorf("TenantError(%q) = %q, want %q", in, got, want)
		}
	}
	if got := TenantError(long); len([]rune(got)) != tenantErrorMax || !strings.HasSuffix(got, "…") {
		t.Errorf("long error: %d runes", len([]rune(got)))
	}
}
