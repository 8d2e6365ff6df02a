package pgcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// DataDirForTest is a data directory for a test's cluster, not yet created,
// in a temporary directory removed when t ends. The server may run as the
// postgres OS user (when tests run as root): the directories above it are
// opened to it.
func DataDirForTest(t testing.TB) string {
	t.Helper()
	parent := t.TempDir()
	for _, d := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(parent, "pg")
}
