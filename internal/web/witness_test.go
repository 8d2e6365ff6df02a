package web_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/web"
	"github.com/jejakhq/jejak/internal/witness"
)

// servedCheckpoint is the newest stored checkpoint of a tenant: what
// /audit/log/checkpoint serves.
type servedCheckpoint struct {
	size int64
	root []byte
	note string
}

func (f *fixture) latestCheckpoint(slug string) servedCheckpoint {
	f.t.Helper()
	var cp servedCheckpoint
	err := f.db.Admin.QueryRow(context.Background(), `SELECT size, root, note FROM audit_checkpoints
		WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1`, f.tenantID(slug)).Scan(&cp.size, &cp.root, &cp.note)
	if err != nil {
		f.t.Fatalf("latest checkpoint of %s: %v", slug, err)
	}
	return cp
}

// tamperCheckpoints runs sql as a superuser with the checkpoints' guard
// triggers off: what an operator with the database could do.
func (f *fixture) tamperCheckpoints(sql string, args ...any) {
	f.t.Helper()
	ctx := context.Background()
	tx, err := f.db.Admin.Begin(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{`ALTER TABLE audit_checkpoints DISABLE TRIGGER USER`, sql, `ALTER TABLE audit_checkpoints ENABLE TRIGGER USER`} {
		a := args
		if q != sql {
			a = nil
		}
		if _, err := tx.Exec(ctx, q, a...); err != nil {
			f.t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// TestWitnessCatchesARewrittenLog: `web audit witness`'s check, run as a
// tenant would against a live dashboard with a read-only token. It
// accepts the first checkpoint, then each one that a consistency proof
// shows extends it. Then the operator misbehaves, one way at a time, and
// each run fails with its own error and keeps the accepted checkpoint:
// another tree of the accepted size signed with the log key (split view),
// an older checkpoint served again (rewound), a checkpoint under another
// key, a dashboard publishing another key, a second database under the
// same key and slug whose longer log does not extend the accepted one
// (a fork), and a revoked token. Honest again, the witness passes.
func TestWitnessCatchesARewrittenLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.record(melati, nil, systemEvents(3, "report.sent")...)
	f.seal()
	owner := f.client()
	owner.login("budi@melati.test")
	token := createToken(t, owner, melati, "witness")
	f.seal()
	dir := t.TempDir()
	o := witness.Options{BaseURL: f.srv.URL, Slug: melati, StateDir: dir, Token: token}

	first, err := witness.Run(ctx, o)
	if err != nil || !first.First || first.Size < 2 {
		t.Fatalf("first run: %+v %v", first, err)
	}
	if pinned, _ := os.ReadFile(filepath.Join(dir, "key")); strings.TrimSpace(string(pinned)) != logSigner().VerifierKey() {
		t.Fatalf("pinned key %q, want the server's", pinned)
	}
	f.record(melati, nil, systemEvents(5, "report.sent")...)
	f.seal()
	grown, err := witness.Run(ctx, o)
	if err != nil || grown.First || grown.PrevSize != first.Size || grown.Size < first.Size+5 {
		t.Fatalf("second run after 5 events: %+v %v (first %d)", grown, err, first.Size)
	}
	if again, err := witness.Run(ctx, o); err != nil || again.Size != grown.Size {
		t.Fatalf("unchanged log: %+v %v", again, err)
	}
	accepted, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	honest := f.latestCheckpoint(melati)
	if honest.size != grown.Size || honest.note != string(accepted) {
		t.Fatalf("the witness accepted size %d, the server's newest checkpoint is %d", grown.Size, honest.size)
	}
	tid := f.tenantID(melati)
	restore := func() {
		f.tamperCheckpoints(`DELETE FROM audit_checkpoints WHERE tenant_id = $1 AND size >= $2`, tid, honest.size)
		f.tamperCheckpoints(`INSERT INTO audit_checkpoints (tenant_id, size, root, note) VALUES ($1, $2, $3, $4)`, tid, honest.size, honest.root, honest.note)
	}
	expectFailure := func(what string, want error, mention string) {
		t.Helper()
		res, err := witness.Run(ctx, o)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), mention) {
			t.Fatalf("%s: got %v, want %v mentioning %q", what, err, want, mention)
		}
		if now, _ := os.ReadFile(filepath.Join(dir, "checkpoint")); !bytes.Equal(now, accepted) {
			t.Fatalf("%s: the witness moved its accepted checkpoint", what)
		}
		if want != witness.ErrBadSignature && want != witness.ErrKeyChanged {
			if ev, err := os.ReadFile(res.Evidence); err != nil || !strings.Contains(string(ev), string(accepted)) {
				t.Fatalf("%s: no evidence with the accepted checkpoint (%q): %v", what, res.Evidence, err)
			}
		}
	}

	// Split view: another root for the accepted size, signed with the log key.
	forgedRoot := bytes.Repeat([]byte{7}, 32)
	split, err := logSigner().Sign(audit.Origin(melati), honest.size, forgedRoot)
	if err != nil {
		t.Fatal(err)
	}
	f.tamperCheckpoints(`UPDATE audit_checkpoints SET root = $3, note = $4 WHERE tenant_id = $1 AND size = $2`, tid, honest.size, forgedRoot, split)
	expectFailure("split view", witness.ErrSplitView, "different roots")
	restore()

	// Rewound: the newest checkpoint gone, an older one served again.
	f.tamperCheckpoints(`DELETE FROM audit_checkpoints WHERE tenant_id = $1 AND size = $2`, tid, honest.size)
	expectFailure("rewound", witness.ErrNotAppendOnly, "rewound")
	restore()

	// Not signed by the pinned key.
	other := otherSigner(t)
	forged, err := other.Sign(audit.Origin(melati), honest.size, honest.root)
	if err != nil {
		t.Fatal(err)
	}
	f.tamperCheckpoints(`UPDATE audit_checkpoints SET note = $3 WHERE tenant_id = $1 AND size = $2`, tid, honest.size, forged)
	expectFailure("another key's signature", witness.ErrBadSignature, "bad checkpoint")
	restore()

	// A dashboard that now publishes another key.
	deps := app.NewDeps(f.db.App, f.db.System, f.jobs, clock.Database{}, quietLog())
	deps.Audit.UseVerifierKey(other.VerifierKey())
	rekeyed := httptest.NewServer(web.New(deps))
	defer rekeyed.Close()
	rk := o
	rk.BaseURL = rekeyed.URL
	if _, err := witness.Run(ctx, rk); !errors.Is(err, witness.ErrKeyChanged) {
		t.Fatalf("another published key: %v, want ErrKeyChanged", err)
	}

	// A fork: another database under the same key and slug, longer.
	fork := newFixture(t)
	forkOwner := fork.client()
	forkOwner.login("budi@melati.test")
	forkToken := createToken(t, forkOwner, melati, "witness")
	fork.record(melati, nil, systemEvents(int(grown.Size)+10, "report.forked")...)
	fork.seal()
	fo := o
	fo.BaseURL, fo.Token = fork.srv.URL, forkToken
	res, err := witness.Run(ctx, fo)
	if !errors.Is(err, witness.ErrNotAppendOnly) || !strings.Contains(err.Error(), "does not extend") || res.Evidence == "" {
		t.Fatalf("a forked log: %+v %v", res, err)
	}

	// Revoked: the run says why.
	var id string
	if err := f.db.Admin.QueryRow(ctx, `SELECT id::text FROM audit_tokens WHERE tenant_id = $1`, tid).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if a := owner.post("/t/"+melati+"/audit/tokens/"+id+"/revoke", owner.withCSRF(nil), true); a.status != 200 {
		t.Fatalf("revoke: %d", a.status)
	}
	if _, err := witness.Run(ctx, o); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a revoked token: %v", err)
	}

	// Honest again, with a new token: the witness goes on from what it
	// accepted.
	o.Token = createToken(t, owner, melati, "witness 2")
	f.seal()
	if res, err := witness.Run(ctx, o); err != nil || res.PrevSize != honest.size || res.Size <= honest.size {
		t.Fatalf("honest run after the tampering: %+v %v", res, err)
	}
}

// otherSigner is a log key that is not the server's.
func otherSigner(t *testing.T) *audit.LogSigner {
	t.Helper()
	s, err := audit.GenerateLogSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
