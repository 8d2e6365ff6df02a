// Package golden compares a test's output with a file recorded earlier
// (testdata/*.golden), for views whose bytes must not change when their
// form does. `go test -update-golden` records the files afresh.
package golden

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update-golden", false, "rewrite testdata/*.golden from the current output")

// Check fails t when got differs from the file at path, showing where; with
// -update-golden it writes got to path instead.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s differs at byte %d:\n got …%s\nwant …%s", path, i,
			got[max(0, i-80):min(len(got), i+80)], string(want[max(0, i-80):min(len(want), i+80)]))
	}
}
