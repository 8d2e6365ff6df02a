package audit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
)

// TestNewestPageFollowsEveryChange: the newest timeline page, kept between
// reads, shows at the next read an event committed after a later one
// (ids out of commit order), an event's seal, one sealed as another
// arrives, and nothing of another tenant; it is served from what was kept
// while nothing changed (a name changed behind Jejak's back shows only
// once the page is older than the age limit).
func TestNewestPageFollowsEveryChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn, other := f.tenant(t, "melati"), f.tenant(t, "senja")
	user := f.user(t, "budi@melati.test", tn)
	event := func(tenant int64) audit.Event {
		return audit.Event{TenantID: tenant, ActorKind: audit.ActorUser, ActorID: &user, Action: "project.create", Entity: "project", EntityID: "1"}
	}
	svc := audit.NewService(f.db.App, f.db.System)
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	svc.SetNewestClock(func() time.Time { return now })
	viewer := reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: user})
	newest := func() []audit.Recorded {
		t.Helper()
		p, err := svc.Timeline(viewer, tn, audit.Filter{}, 0, 50, false)
		if err != nil {
			t.Fatal(err)
		}
		return p.Rows
	}
	fresh := func() []audit.Recorded {
		t.Helper()
		var p audit.Page
		if err := database.InTenantUserTx(ctx, f.db.App, tn, user, func(tx pgx.Tx) (err error) {
			p, err = audit.Timeline(ctx, tx, tn, audit.Filter{}, 0, 50)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p.Rows
	}
	same := func(step string) []audit.Recorded {
		t.Helper()
		got, want := newest(), fresh()
		if !slices.EqualFunc(got, want, func(a, b audit.Recorded) bool {
			return a.ID == b.ID && a.Seq == b.Seq && a.ActorName == b.ActorName && a.TenantID == b.TenantID
		}) {
			t.Fatalf("%s: the newest page kept %v, the trail holds %v", step, ids(got), ids(want))
		}
		return got
	}

	f.record(t, event(tn))
	f.record(t, event(tn))
	f.record(t, event(other))
	if rows := same("first read"); len(rows) != 2 {
		t.Fatalf("first read: %d events, want 2", len(rows))
	}
	f.record(t, event(tn))
	same("a new event")

	// Two writers: the first to insert commits last.
	early, err := f.db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx) //nolint:errcheck
	if _, err := early.Exec(ctx, `SELECT set_config('app.tenant_id', $1::bigint::text, true)`, tn); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rec.Record(ctx, early, event(tn)); err != nil {
		t.Fatal(err)
	}
	f.record(t, event(tn))
	before := same("a later id committed first")
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if after := same("the earlier id committed"); len(after) != len(before)+1 {
		t.Fatalf("the earlier id committed: %d events, want %d", len(after), len(before)+1)
	}

	f.seal(t)
	sealed := same("sealed")
	for _, e := range sealed {
		if e.Seq == 0 {
			t.Fatalf("event %d shows unsealed after the seal", e.ID)
		}
	}

	// One event arrives and is sealed between two reads: the queue's
	// count is what it was, only the tree grew.
	f.record(t, event(tn))
	if res, err := f.sealer.SealOnce(ctx, false); err != nil || res.Sealed != 1 {
		t.Fatalf("seal the one event: %+v, %v", res, err)
	}
	if got := same("one in and sealed"); len(got) != len(sealed)+1 || got[0].Seq == 0 {
		t.Fatalf("one in and sealed: %d events, the newest with seq %d", len(got), got[0].Seq)
	}

	// Nothing changed in the trail: the page kept is served, the name
	// with it, until the page is older than the age limit.
	if _, err := f.db.Admin.Exec(ctx, `UPDATE users SET name = 'Budi Santoso' WHERE id = $1`, user); err != nil {
		t.Fatal(err)
	}
	if got := newest(); got[0].ActorName != "budi@melati.test" {
		t.Fatalf("within the age limit the kept page says %q; it was read afresh", got[0].ActorName)
	}
	now = now.Add(svc.NewestMaxAge())
	if got := newest(); got[0].ActorName != "Budi Santoso" {
		t.Fatalf("after the age limit the page says %q", got[0].ActorName)
	}
}

func ids(rs []audit.Recorded) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestNewestPageUpdatedFromWhatChanged: a kept newest page that has older
// pages after it is brought up to date from what changed since it was read
// (not read again) and then equals a fresh read, rows, seals and the next
// page's cursor alike: new events push the oldest rows off, an event
// committed after a later one shows when its id is on the page and stays
// off when it is below the page's last row, and seals show. When more
// changed than an update reads through, the page is read afresh.
func TestNewestPageUpdatedFromWhatChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	user := f.user(t, "budi@melati.test", tn)
	event := audit.Event{TenantID: tn, ActorKind: audit.ActorUser, ActorID: &user, Action: "project.create", Entity: "project", EntityID: "1"}
	svc := audit.NewService(f.db.App, f.db.System)
	viewer := reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: user})
	const limit = 3
	same := func(step string) audit.Page {
		t.Helper()
		got, err := svc.Timeline(viewer, tn, audit.Filter{}, 0, limit, false)
		if err != nil {
			t.Fatal(err)
		}
		var want audit.Page
		if err := database.InTenantUserTx(ctx, f.db.App, tn, user, func(tx pgx.Tx) (err error) {
			want, err = audit.Timeline(ctx, tx, tn, audit.Filter{}, 0, limit)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got.Next != want.Next || !slices.EqualFunc(got.Rows, want.Rows, func(a, b audit.Recorded) bool {
			return a.ID == b.ID && a.Seq == b.Seq && a.ActorName == b.ActorName
		}) {
			t.Fatalf("%s: the newest page shows %v (next %d, seqs %v), the trail holds %v (next %d, seqs %v)",
				step, ids(got.Rows), got.Next, seqs(got.Rows), ids(want.Rows), want.Next, seqs(want.Rows))
		}
		return got.Page
	}
	updated := func(step string, want int64) {
		t.Helper()
		if got := svc.NewestUpdates(); got != want {
			t.Fatalf("%s: %d pages brought up to date, want %d", step, got, want)
		}
	}
	// begin records an event in a transaction left open: its id is taken
	// now, it commits when the caller says.
	begin := func() pgx.Tx {
		t.Helper()
		tx, err := f.db.App.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT set_config('app.tenant_id', $1::bigint::text, true)`, tn); err != nil {
			t.Fatal(err)
		}
		if _, err := f.rec.Record(ctx, tx, event); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	for range 5 {
		f.record(t, event)
	}
	if p := same("first read"); len(p.Rows) != limit || p.Next == 0 {
		t.Fatalf("first read: %d rows, next %d; want a full page with older ones after it", len(p.Rows), p.Next)
	}
	updated("first read", 0)

	f.record(t, event)
	same("a new event")
	updated("a new event", 1)

	early := begin()
	f.record(t, event)
	same("a later id committed first")
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if p := same("the earlier id committed"); p.Rows[1].ID != p.Rows[0].ID-1 {
		t.Fatalf("the earlier id committed: rows %v, want it second", ids(p.Rows))
	}
	updated("out of order on the page", 3)

	below := begin()
	for range 4 {
		f.record(t, event)
	}
	before := same("four newer events")
	if err := below.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if p := same("an earlier id committed below the page"); !slices.Equal(ids(p.Rows), ids(before.Rows)) {
		t.Fatalf("an event below the page's last row changed it: %v, was %v", ids(p.Rows), ids(before.Rows))
	}
	updated("out of order below the page", 5)

	f.seal(t)
	for _, r := range same("sealed").Rows {
		if r.Seq == 0 {
			t.Fatalf("event %d shows unsealed after the seal", r.ID)
		}
	}
	updated("sealed", 6)

	// More changes than an update reads through: read afresh.
	if err := database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) error {
		for range audit.NewestChangedMax + 1 {
			if _, err := f.rec.Record(ctx, tx, event); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	same("a burst past the bound")
	updated("a burst past the bound", 6)
	f.seal(t)
	same("the burst sealed")
	updated("the burst sealed", 6)
}

func seqs(rs []audit.Recorded) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}
