package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/testdb"
)

func TestAuditVerifyCommand(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	env := func(k string) string {
		if k == "DATABASE_URL" {
			return db.URL
		}
		return ""
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"seed", "--audit-events", "300", "--tenants", "2"}, env, &out); err != nil {
		t.Fatalf("seed: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify"}, env, &out); err != nil {
		t.Fatalf("verify of an intact trail failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "toko-bunga-melati") || strings.Contains(out.String(), "BROKEN") {
		t.Fatalf("verify output:\n%s", out.String())
	}

	// A superuser rewrites history behind the triggers' back.
	_, err := db.Admin.Exec(ctx, `ALTER TABLE audit_events DISABLE TRIGGER USER;
		UPDATE audit_events SET action = 'project.rename'
		WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja') AND seq = 2;
		ALTER TABLE audit_events ENABLE TRIGGER USER;`)
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	out.Reset()
	err = run(ctx, []string{"audit", "verify", "--tenant", "kopi-senja"}, env, &out)
	if err == nil || !strings.Contains(out.String(), "BROKEN  first bad event #2") {
		t.Fatalf("tampered chain: err=%v output:\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify", "--tenant", "toko-bunga-melati"}, env, &out); err != nil {
		t.Fatalf("another tenant's intact chain: %v", err)
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

// TestAuditAnchorCommands: `web audit anchor` writes signed checkpoints;
// after a superuser rewinds a chain (tail deleted, head moved back) plain
// verification still passes, and `web audit verify --anchors` fails.
func TestAuditAnchorCommands(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	env := func(k string) string {
		switch k {
		case "DATABASE_URL":
			return db.URL
		case "JEJAK_ANCHOR_DIR":
			return dir
		}
		return ""
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"seed", "--audit-events", "200", "--tenants", "2"}, env, &out); err != nil {
		t.Fatalf("seed: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "anchor"}, env, &out); err != nil || !strings.Contains(out.String(), "anchored") {
		t.Fatalf("anchor: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify", "--anchors", dir}, env, &out); err != nil {
		t.Fatalf("verify against fresh anchors: %v\n%s", err, out.String())
	}
	_, err := db.Admin.Exec(ctx, `BEGIN;
		SET LOCAL session_replication_role = replica;
		DELETE FROM audit_events WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja')
		   AND seq > (SELECT seq - 2 FROM audit_heads WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja'));
		UPDATE audit_heads h SET seq = e.seq, hash = e.hash
		  FROM (SELECT seq, hash FROM audit_events WHERE tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja')
		         ORDER BY seq DESC LIMIT 1) e
		 WHERE h.tenant_id = (SELECT id FROM tenants WHERE slug = 'kopi-senja');
		COMMIT;`)
	if err != nil {
		t.Fatalf("rewind: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "verify"}, env, &out); err != nil {
		t.Fatalf("the rewound chain should verify on its own (that is the attack): %v\n%s", err, out.String())
	}
	out.Reset()
	err = run(ctx, []string{"audit", "verify", "--anchors", dir}, env, &out)
	if err == nil || !strings.Contains(out.String(), "kopi-senja") || !strings.Contains(out.String(), "shorter") {
		t.Fatalf("rewound chain against anchors: err=%v output:\n%s", err, out.String())
	}
}
