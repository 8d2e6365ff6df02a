package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// testEnv is the environment of the commands under test: db, and an
// anchor directory of the test's own.
func testEnv(t *testing.T, db *testdb.DB) (func(string) string, string) {
	dir := t.TempDir()
	return func(k string) string {
		switch k {
		case "DATABASE_URL":
			return db.URL
		case "JEJAK_ANCHOR_DIR":
			return dir
		}
		return ""
	}, dir
}

// TestAuditVerifyCommand: `web audit anchor` seals the seeded trail and
// signs it; `web audit verify` passes, then names the first bad event of
// a tenant whose sealed event a superuser altered, and still passes the
// other tenant. An export and a "Prove this event" bundle check offline
// with the verifier key alone; a cut export and another key do not.
func TestAuditVerifyCommand(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	env, dir := testEnv(t, db)
	var out bytes.Buffer
	if err := run(ctx, []string{"seed", "--audit-events", "300", "--tenants", "2"}, env, &out); err != nil {
		t.Fatalf("seed: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "anchor"}, env, &out); err != nil || !strings.Contains(out.String(), "sealed and signed") {
		t.Fatalf("anchor: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify"}, env, &out); err != nil {
		t.Fatalf("verify of an intact trail failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "toko-bunga-melati") || !strings.Contains(out.String(), "checking against") || strings.Contains(out.String(), "BROKEN") {
		t.Fatalf("verify output:\n%s", out.String())
	}

	pub, err := anchor.LoadPublic(dir)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := audit.VerifierKeyOf(pub)
	if err != nil {
		t.Fatal(err)
	}
	var melati int64
	if err := db.Admin.QueryRow(ctx, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`).Scan(&melati); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if err := audit.ExportJSONLines(ctx, db.App, melati, audit.Filter{}, &export); err != nil {
		t.Fatal(err)
	}
	bundle, err := audit.NewService(db.App, db.System).ProofBundle(ctx, melati, 2)
	if err != nil {
		t.Fatal(err)
	}
	bundleJSON, _ := json.Marshal(bundle)
	lines := strings.SplitAfter(export.String(), "\n")
	files := map[string]string{
		"export.jsonl": export.String(),
		"cut.jsonl":    strings.Join(append(lines[:1], lines[2:]...), ""), // the second event left out
		"proof.json":   string(bundleJSON),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	other, err := audit.VerifierKeyOf(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"audit", "verify-export", "--key", vkey, filepath.Join(dir, "export.jsonl")}, true},
		{[]string{"audit", "verify-export", "--key", vkey, filepath.Join(dir, "cut.jsonl")}, false},
		{[]string{"audit", "verify-export", "--key", other, filepath.Join(dir, "export.jsonl")}, false},
		{[]string{"audit", "verify-proof", "--key", vkey, filepath.Join(dir, "proof.json")}, true},
		{[]string{"audit", "verify-proof", "--key", other, filepath.Join(dir, "proof.json")}, false},
	} {
		out.Reset()
		err := run(ctx, tc.args, env, &out)
		if (err == nil) != tc.ok || (tc.ok && !strings.HasPrefix(out.String(), "ok: ")) {
			t.Errorf("%v: err=%v, want ok=%v; output: %s", tc.args[:2], err, tc.ok, out.String())
		}
	}

	// A superuser rewrites a sealed event behind the triggers' back.
	_, err = db.Admin.Exec(ctx, `ALTER TABLE audit_sealed DISABLE TRIGGER USER;
		UPDATE audit_sealed SET action = 'project.rename'
		WHERE id = (SELECT event_id FROM audit_leaves WHERE seq = 2
		              AND tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja'));
		ALTER TABLE audit_sealed ENABLE TRIGGER USER;`)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	out.Reset()
	err = run(ctx, []string{"audit", "verify", "--tenant", "kopi-senja"}, env, &out)
	if err == nil || !strings.Contains(out.String(), "BROKEN  first bad event #2") {
		t.Fatalf("tampered log: err=%v output:\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify", "--tenant", "toko-bunga-melati"}, env, &out); err != nil {
		t.Fatalf("another tenant's intact log: %v", err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"frobnicate"}, nil},
		{[]string{"audit"}, nil},
		{[]string{"audit", "explode"}, nil},
		{[]string{"serve", "--workers", "-1"}, nil},
		{[]string{"serve", "extra"}, nil},
		{nil, map[string]string{"JEJAK_WORKERS": "many"}},
		{nil, map[string]string{"JEJAK_DEMO": "perhaps"}},
		{nil, map[string]string{"JEJAK_LEASE": "soon"}},
		{nil, map[string]string{"JEJAK_LEASE": "10s", "JEJAK_HEARTBEAT": "10s"}},
		{[]string{"audit", "verify-export", "export.jsonl"}, nil},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out)
		if err == nil {
			t.Errorf("run(%v, %v) accepted bad input", tc.args, tc.env)
		}
	}
}

// TestAuditAnchorCommands: `web audit anchor` appends signed checkpoints
// to the anchor file; after a superuser rewinds a log (tail deleted, tree
// and checkpoints moved back to an earlier signed state) verification of
// the database alone passes, and verification against the anchors fails.
func TestAuditAnchorCommands(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	env, dir := testEnv(t, db)
	var out bytes.Buffer
	// A witness of kopi-senja's log on "another machine": its own state
	// directory, a read-only token, the dashboard over HTTP.
	var witnessEnv func(string) string
	witnessArgs := []string{"audit", "witness", "--slug", "kopi-senja", "--state", t.TempDir()}
	for round := 0; round < 2; round++ {
		if err := run(ctx, []string{"seed", "--audit-events", "200", "--tenants", "2"}, env, &out); err != nil {
			t.Fatalf("seed: %v\n%s", err, out.String())
		}
		out.Reset()
		if err := run(ctx, []string{"audit", "anchor"}, env, &out); err != nil || !strings.Contains(out.String(), "sealed and signed") {
			t.Fatalf("anchor: %v\n%s", err, out.String())
		}
		if round == 0 {
			url, token := dashboard(t, db, dir, "kopi-senja", "sari@senja.test")
			witnessArgs = append(witnessArgs, "--url", url)
			witnessEnv = func(k string) string {
				if k == "JEJAK_AUDIT_TOKEN" {
					return token
				}
				return ""
			}
		}
		out.Reset()
		want := []string{"first checkpoint accepted", "consistency proof checked"}[round]
		if err := run(ctx, witnessArgs, witnessEnv, &out); err != nil || !strings.Contains(out.String(), want) {
			t.Fatalf("witness run %d: %v\n%s", round+1, err, out.String())
		}
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify", "--anchors", dir}, env, &out); err != nil {
		t.Fatalf("verify against fresh anchors: %v\n%s", err, out.String())
	}
	_, err := db.Admin.Exec(ctx, `BEGIN;
		SET LOCAL session_replication_role = replica;
		CREATE TEMP TABLE rewind ON COMMIT DROP AS
		  SELECT c.tenant_id, c.size, c.root FROM audit_checkpoints c JOIN tenants t ON t.id = c.tenant_id
		   WHERE t.slug = 'kopi-senja' ORDER BY c.size LIMIT 1;
		DELETE FROM audit_sealed e USING audit_leaves l, rewind r
		 WHERE l.tenant_id = r.tenant_id AND e.tenant_id = r.tenant_id AND e.id = l.event_id AND l.seq > r.size;
		DELETE FROM audit_leaves l USING rewind r WHERE l.tenant_id = r.tenant_id AND l.seq > r.size;
		DELETE FROM audit_checkpoints c USING rewind r WHERE c.tenant_id = r.tenant_id AND c.size > r.size;
		UPDATE audit_trees t SET size = r.size, signed_size = r.size, root = r.root FROM rewind r WHERE t.tenant_id = r.tenant_id;
		COMMIT;`)
	if err != nil {
		t.Fatalf("rewind: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify", "--anchors", t.TempDir() + "/none"}, env, &out); err == nil {
		t.Fatalf("a missing anchor directory named on the command line was accepted:\n%s", out.String())
	}
	// The database alone (an operator without the anchor directory).
	envNoAnchors := func(k string) string {
		if k == "JEJAK_ANCHOR_DIR" {
			return t.TempDir()
		}
		return env(k)
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify"}, envNoAnchors, &out); err != nil {
		t.Fatalf("the rewound log should verify on its own (that is the attack): %v\n%s", err, out.String())
	}
	out.Reset()
	err = run(ctx, []string{"audit", "verify", "--anchors", dir}, env, &out)
	if err == nil || !strings.Contains(out.String(), "kopi-senja") || !strings.Contains(out.String(), "rewound") {
		t.Fatalf("rewound log against anchors: err=%v output:\n%s", err, out.String())
	}
	// The witness, which never saw the anchor directory, catches it too.
	out.Reset()
	err = run(ctx, witnessArgs, witnessEnv, &out)
	if err == nil || !strings.Contains(err.Error(), "rewritten") || !strings.Contains(err.Error(), "rewound") {
		t.Fatalf("witness of the rewound log: %v\n%s", err, out.String())
	}
	// Without a token it says how to get one.
	if err := run(ctx, witnessArgs, func(string) string { return "" }, &out); err == nil || !strings.Contains(err.Error(), "JEJAK_AUDIT_TOKEN") {
		t.Fatalf("witness without a token: %v", err)
	}
}

// dashboard serves db's dashboard (log key from the anchor directory) on
// a loopback port and returns its address and a read-only audit token of
// slug, created for its owner.
func dashboard(t *testing.T, db *testdb.DB, anchorDir, slug, owner string) (string, string) {
	t.Helper()
	ctx := context.Background()
	pub, err := anchor.LoadPublic(anchorDir)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := audit.VerifierKeyOf(pub)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	deps := app.NewDeps(db.App, db.System, nil, clock.Database{}, log)
	deps.Audit.UseVerifierKey(vkey)
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	var tid, uid int64
	if err := db.Admin.QueryRow(ctx, `SELECT t.id, u.id FROM tenants t, users u WHERE t.slug = $1 AND u.email = $2`, slug, owner).Scan(&tid, &uid); err != nil {
		t.Fatal(err)
	}
	_, token, err := deps.AuditTokens.Create(ctx, tid, uid, "cli witness")
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, token
}
