package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/testwait"
	"github.com/jejakhq/jejak/internal/webhook"
)

// specVerify is a receiver's check with the Standard Webhooks project's
// own Go library, not Jejak's code. The timestamp's tolerance is left out:
// the tests' clock is frozen in the past.
func specVerify(secret string, r received) bool {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return false
	}
	h := http.Header{}
	h.Set("webhook-id", r.id)
	h.Set("webhook-timestamp", r.ts)
	h.Set("webhook-signature", r.sig)
	return wh.VerifyIgnoringTimestamp([]byte(r.body), h) == nil
}

func newKey(t *testing.T) *webhook.Sealer {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	s, err := webhook.NewSealer(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSecretsSealedAtRest: a superuser reading webhook_endpoints sees no
// signing secret, only sealed values; secrets stored readable before are
// sealed at start; deliveries (also during a rotation, signed with both
// secrets) verify with the secrets the owner was shown; a server with
// another key cannot sign, and sends nothing.
func TestSecretsSealedAtRest(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	rcv := newReceiver(t, nil, 200)
	old, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/old", "*") // before sealing existed
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	if n, err := webhook.SealStored(ctx, v.db.System, key); err != nil || n != 1 {
		t.Fatalf("sealed %d stored secrets (%v), want 1", n, err)
	}
	if n, _ := webhook.SealStored(ctx, v.db.System, key); n != 0 {
		t.Fatalf("a second start sealed %d again", n)
	}
	v.svc.SealWith(key)
	v.deliver.Sealer = key
	created, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/new", "*")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := v.svc.Rotate(ctx, v.tenant, v.owner, created.Endpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := v.db.Admin.Query(ctx, "SELECT secret || ' ' || coalesce(previous_secret, '') FROM webhook_endpoints")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var stored string
		if err := rows.Scan(&stored); err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{old.Secret, created.Secret, rotated} {
			if strings.Contains(stored, strings.TrimPrefix(secret, "whsec_")) {
				t.Fatalf("a secret is readable in the table: %s", stored)
			}
		}
		if !strings.HasPrefix(stored, "jejak-sealed:v1:") {
			t.Fatalf("stored secret not sealed: %s", stored)
		}
	}
	v.emit(t, 1, 1, nil)
	v.work(t)
	got := rcv.all()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(got))
	}
	for _, r := range got {
		secrets := []string{old.Secret}
		if r.sig != "" && strings.Count(r.sig, "v1,") == 2 {
			secrets = []string{rotated, created.Secret} // the rotated endpoint signs with both
		}
		for _, s := range secrets {
			if !specVerify(s, r) {
				t.Fatalf("a delivery does not verify with a secret its owner was shown (signature %q)", r.sig)
			}
		}
	}

	// Another server key opens nothing: the attempt fails and nothing is sent.
	v.deliver.Sealer = newKey(t)
	v.emit(t, 2, 1, nil)
	v.work(t)
	if len(rcv.all()) != 2 {
		t.Fatal("a delivery went out signed without the right key")
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_attempts WHERE error LIKE '%sealing key%'"); n != 2 {
		t.Fatalf("%d attempts failed for the key, want 2", n)
	}
}

// TestLoadSealerKeepsItsKey: the key file is created once, private to its
// owner, and read back the same on the next start.
func TestLoadSealerKeepsItsKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys", "webhook-secrets.key")
	a, err := webhook.LoadSealer(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	b, err := webhook.LoadSealer(path)
	if err != nil {
		t.Fatal(err)
	}
	// What a sealed a stored secret, b opens: the same key.
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.svc.SealWith(a)
	c, err := v.svc.Create(context.Background(), v.tenant, v.owner, "https://hooks.example/x", "*")
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := v.db.Admin.QueryRow(context.Background(), "SELECT secret FROM webhook_endpoints").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(v.tenant, stored); err != nil || got != c.Secret {
		t.Fatalf("reloaded key opens %q, %v", got, err)
	}
	if _, err := b.Open(v.tenant+1, stored); err == nil {
		t.Fatal("a sealed secret opened for another tenant's row")
	}
}

// TestLoadSealerAtOnce: replicas started together on one key directory
// each create the key file if it is missing; every one of them must start,
// with the one key the file holds. The loser of the creation once read the
// winner's file before its key was written in it, and failed to start.
func TestLoadSealerAtOnce(t *testing.T) {
	t.Parallel()
	const replicas = 8
	for round := range 50 {
		path := filepath.Join(t.TempDir(), "webhook-secrets.key")
		sealers := make([]*webhook.Sealer, replicas)
		errs := make([]error, replicas)
		testwait.Together(replicas, func(i int) { sealers[i], errs[i] = webhook.LoadSealer(path) })
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: replica %d: %v", round, i, err)
			}
		}
		file, err := webhook.LoadSealer(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range sealers {
			sealed, err := s.Seal(1, "whsec_x")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := file.Open(1, sealed); err != nil || got != "whsec_x" {
				t.Fatalf("round %d: replica %d sealed with a key the file does not hold: %q, %v", round, i, got, err)
			}
		}
	}
}

// TestSendTestEvent: "send test event" delivers the catalog's example of
// the chosen type to one endpoint, signed (verified from the spec), as
// evt_test_…; an unknown type is refused, another tenant gets 404, and it
// is audited.
func TestSendTestEvent(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	rcv := newReceiver(t, nil, 200)
	c, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/hook", "project.created")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.SendTest(ctx, v.tenant, v.owner, c.Endpoint.ID, "invoice.paid"); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("unknown type: %v", err)
	}
	other := seedTenant(t, v.db, "other")
	if _, err := v.svc.SendTest(ctx, other.tenant, other.owner, c.Endpoint.ID, "project.deleted"); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("another tenant: %v", err)
	}
	d, err := v.svc.SendTest(ctx, v.tenant, v.owner, c.Endpoint.ID, "project.deleted")
	if err != nil || !strings.HasPrefix(d.EventID, "evt_test_") {
		t.Fatalf("send test: %+v %v", d, err)
	}
	v.work(t)
	got := rcv.all()
	if len(got) != 1 || got[0].id != d.EventID || !specVerify(c.Secret, got[0]) {
		t.Fatalf("the receiver got %d requests (%+v)", len(got), got)
	}
	var body struct {
		Type string
		Test bool
		Data struct {
			Name string `json:"name"`
		}
	}
	if err := json.Unmarshal(got[0].body, &body); err != nil || body.Type != "project.deleted" || !body.Test || body.Data.Name != "Katalog Musim Hujan" {
		t.Fatalf("test body %s (%v)", got[0].body, err)
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.test'"); n != 1 {
		t.Fatalf("%d test events in the trail, want 1", n)
	}
	// Behind an open breaker a test event is held like any other, with no
	// job of its own.
	if _, err := v.db.Admin.Exec(ctx, "UPDATE webhook_endpoints SET breaker_open_until = now() + interval '1 hour' WHERE id = $1",
		c.Endpoint.ID); err != nil {
		t.Fatal(err)
	}
	v.clk.Advance(time.Second) // a test event's id is its time
	held, err := v.svc.SendTest(ctx, v.tenant, v.owner, c.Endpoint.ID, "project.deleted")
	if err != nil || !held.Held {
		t.Fatalf("test event behind an open breaker: %+v %v", held, err)
	}
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = $1 AND state = 'pending'", webhook.Kind); n != 0 {
		t.Fatalf("%d jobs for a held test event, want none", n)
	}
}
