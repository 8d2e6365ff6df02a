package audit

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestNewestPageFollowsEveryChange: the newest timeline page, kept between
// reads, shows at the next read an event committed after a later one
// (ids out of commit order), an event's seal, one sealed as another
// arrives, and nothing of another
// tenant; it is served from what was kept while nothing changed (a name
// changed behind Jejak's back shows only once the page is older than
// maxAge).
func TestNewestPageFollowsEveryChange(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tn, other, user int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('melati', 'Melati') RETURNING id`).Scan(&tn); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('senja', 'Senja') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, `INSERT INTO users (email, name, password_hash) VALUES ('budi@melati.test', 'Budi', 'x') RETURNING id`).Scan(&user); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'owner'), ($3, $2, 'owner')`, tn, user, other); err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(clock.Database{})
	record := func(tx pgx.Tx, tenant int64) {
		t.Helper()
		if _, err := rec.Record(ctx, tx, Event{TenantID: tenant, ActorKind: ActorUser, ActorID: &user, Action: "project.create", Entity: "project", EntityID: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(tenant int64) {
		t.Helper()
		if err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error { record(tx, tenant); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	signer, err := GenerateLogSigner()
	if err != nil {
		t.Fatal(err)
	}
	sealer := NewSealer(db.System, SealerOptions{Signer: signer})
	svc := NewService(db.App, db.System)
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	svc.newestPages.now = func() time.Time { return now }
	viewer := reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: user})
	newest := func() []Recorded {
		t.Helper()
		p, err := svc.Timeline(viewer, tn, Filter{}, 0, 50, false)
		if err != nil {
			t.Fatal(err)
		}
		return p.Rows
	}
	fresh := func() []Recorded {
		t.Helper()
		var p Page
		if err := database.InTenantUserTx(ctx, db.App, tn, user, func(tx pgx.Tx) (err error) {
			p, err = Timeline(ctx, tx, tn, Filter{}, 0, 50)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p.Rows
	}
	same := func(step string) []Recorded {
		t.Helper()
		got, want := newest(), fresh()
		if !slices.EqualFunc(got, want, func(a, b Recorded) bool {
			return a.ID == b.ID && a.Seq == b.Seq && a.ActorName == b.ActorName && a.TenantID == b.TenantID
		}) {
			t.Fatalf("%s: the newest page kept %v, the trail holds %v", step, ids(got), ids(want))
		}
		return got
	}

	commit(tn)
	commit(tn)
	commit(other)
	if rows := same("first read"); len(rows) != 2 {
		t.Fatalf("first read: %d events, want 2", len(rows))
	}
	commit(tn)
	same("a new event")

	// Two writers: the first to insert commits last.
	early, err := db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx) //nolint:errcheck
	if _, err := early.Exec(ctx, `SELECT set_config('app.tenant_id', $1::bigint::text, true)`, tn); err != nil {
		t.Fatal(err)
	}
	record(early, tn)
	commit(tn)
	before := same("a later id committed first")
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if after := same("the earlier id committed"); len(after) != len(before)+1 {
		t.Fatalf("the earlier id committed: %d events, want %d", len(after), len(before)+1)
	}

	if err := sealer.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	sealed := same("sealed")
	for _, e := range sealed {
		if e.Seq == 0 {
			t.Fatalf("event %d shows unsealed after the seal", e.ID)
		}
	}

	// One event arrives and is sealed between two reads: the queue's
	// count is what it was, only the tree grew.
	commit(tn)
	if res, err := sealer.SealOnce(ctx, false); err != nil || res.Sealed != 1 {
		t.Fatalf("seal the one event: %+v, %v", res, err)
	}
	if got := same("one in and sealed"); len(got) != len(sealed)+1 || got[0].Seq == 0 {
		t.Fatalf("one in and sealed: %d events, the newest with seq %d", len(got), got[0].Seq)
	}

	// Nothing changed in the trail: the page kept is served, the name
	// with it, until the page is older than maxAge.
	if _, err := db.Admin.Exec(ctx, `UPDATE users SET name = 'Budi Santoso' WHERE id = $1`, user); err != nil {
		t.Fatal(err)
	}
	if got := newest(); got[0].ActorName != "Budi" {
		t.Fatalf("within maxAge the kept page says %q; it was read afresh", got[0].ActorName)
	}
	now = now.Add(svc.newestPages.maxAge)
	if got := newest(); got[0].ActorName != "Budi Santoso" {
		t.Fatalf("after maxAge the page says %q", got[0].ActorName)
	}
}

func ids(rs []Recorded) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestNewestPagesStayWithinTheirBounds: a page too large is not kept, the
// pages kept never hold more than newestPagesBytes however many tenants
// read, and a tenant's page read again replaces its last one in the count.
func TestNewestPagesStayWithinTheirBounds(t *testing.T) {
	t.Parallel()
	c := newNewestPages()
	now := c.now()
	page := func(detail int) Page {
		return Page{Rows: []Recorded{{Event: Event{Detail: make(json.RawMessage, detail)}}}}
	}
	v := timelineVersion{size: 1}
	c.put(1, v, 50, now, page(newestPagesBytes/64+1))
	if _, ok := c.get(1, v, 50); ok {
		t.Fatal("an oversized page was kept")
	}
	for i := int64(1); i <= 300; i++ {
		c.put(i, v, 50, now, page(newestPagesBytes/100))
		if c.bytes > newestPagesBytes {
			t.Fatalf("after %d tenants the pages hold %d bytes, over %d", i, c.bytes, newestPagesBytes)
		}
		if _, ok := c.get(i, v, 50); !ok {
			t.Fatalf("tenant %d's page, just put, is not kept", i)
		}
	}
	before := c.bytes
	c.put(300, v, 50, now, page(newestPagesBytes/100))
	if c.bytes != before {
		t.Fatalf("a page put again counts %d bytes, was %d", c.bytes, before)
	}
}
