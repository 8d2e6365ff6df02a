package keyfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jejakhq/jejak/internal/keyfile"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestCreateAtOnce: creators released together each get the content the
// file holds, whole, and the file is private to its owner with nothing
// left beside it.
func TestCreateAtOnce(t *testing.T) {
	t.Parallel()
	const creators = 8
	for round := range 50 {
		dir := t.TempDir()
		path := filepath.Join(dir, "keys", "secret.key")
		got := make([][]byte, creators)
		errs := make([]error, creators)
		testwait.Together(creators, func(i int) {
			got[i], errs[i] = keyfile.Create(path, []byte("key of creator "+strconv.Itoa(i)+"\n"))
		})
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range creators {
			if errs[i] != nil || !bytes.Equal(got[i], file) {
				t.Fatalf("round %d: creator %d got %q (%v), the file holds %q", round, i, got[i], errs[i], file)
			}
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: key file mode %v (%v), want 0600", round, st.Mode().Perm(), err)
		}
		if left, _ := os.ReadDir(filepath.Dir(path)); len(left) != 1 {
			t.Fatalf("round %d: %d files beside the key, want none", round, len(left)-1)
		}
	}
}

// TestReadKeepsTheFile: a key file that exists is read as it is, without
// making a fresh key; a missing one is created with the fresh key.
func TestReadKeepsTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret.key")
	fresh := func(k string) func() ([]byte, error) {
		return func() ([]byte, error) { return []byte(k), nil }
	}
	if got, err := keyfile.Read(path, fresh("first\n")); err != nil || string(got) != "first\n" {
		t.Fatalf("Read of a missing file = %q, %v; want the fresh key", got, err)
	}
	if got, err := keyfile.Read(path, fresh("second\n")); err != nil || string(got) != "first\n" {
		t.Fatalf("Read of an existing file = %q, %v; want the key it holds", got, err)
	}
}
