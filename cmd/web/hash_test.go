package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestServedBinaryHashesAtFullCost: a test binary hashes passwords with
// argon2id's smallest memory (user.hashParams), so no test run in-process
// would notice the served binary doing the same. This one builds the real
// binary, seeds the demo accounts with it, and reads their hashes: 64 MiB.
func TestServedBinaryHashesAtFullCost(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	bin := filepath.Join(t.TempDir(), "web")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build cmd/web: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "seed", "--database-url", db.URL, "--data-dir", t.TempDir()).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	rows, err := db.Admin.Query(context.Background(), "SELECT password_hash FROM users")
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(hashes) == 0 {
		t.Fatalf("demo users' hashes: %d (%v)", len(hashes), err)
	}
	for _, h := range hashes {
		if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=1,") {
			t.Errorf("the served binary hashed a demo password as %.40s…, want argon2id with m=65536", h)
		}
	}
}
