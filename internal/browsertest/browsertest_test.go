package browsertest

import "testing"

// TestSkipWanted: only JEJAK_SKIP_BROWSER=1 skips, and never under CI.
func TestSkipWanted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		env        map[string]string
		skip, fail bool
	}{
		{"nothing set", nil, false, false},
		{"make check", map[string]string{SkipEnv: "1"}, true, false},
		{"other value", map[string]string{SkipEnv: "true"}, false, false},
		{"CI alone", map[string]string{"CI": "true"}, false, false},
		{"CI refuses the skip", map[string]string{SkipEnv: "1", "CI": "true"}, false, true},
		{"CI=1 refuses the skip", map[string]string{SkipEnv: "1", "CI": "1"}, false, true},
		{"CI=false allows it", map[string]string{SkipEnv: "1", "CI": "false"}, true, false},
	} {
		skip, reason := skipWanted(func(k string) string { return c.env[k] })
		if skip != c.skip || (!skip && reason != "") != c.fail {
			t.Errorf("%s: skip=%v reason=%q, want skip=%v fail=%v", c.name, skip, reason, c.skip, c.fail)
		}
	}
}
