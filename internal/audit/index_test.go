package audit_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testwait"
)

// searchIndexRows counts tenantID's rows in the name search's index (texts
// and word postings).
func (f *fixture) searchIndexRows(t *testing.T, tenantID int64) (texts, words int) {
	t.Helper()
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM audit_search WHERE tenant_id = $1),
		(SELECT count(*) FROM audit_words WHERE tenant_id = $1)`, tenantID).Scan(&texts, &words); err != nil {
		t.Fatal(err)
	}
	return texts, words
}

// namedEvent records a project event named name.
func (f *fixture) namedEvent(t *testing.T, tenantID int64, entityID, name string) audit.Recorded {
	t.Helper()
	detail, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		t.Fatal(err)
	}
	return f.record(t, audit.Event{TenantID: tenantID, ActorKind: audit.ActorSystem, Action: "project.create",
		Entity: "project", EntityID: entityID, Detail: detail})
}

// searchPage is a name search's page of tenantID's timeline below
// beforeID (0: from the newest), as "action entity_id".
func searchPage(t *testing.T, f *fixture, tn int64, term string, beforeID int64) []string {
	t.Helper()
	s, err := audit.CheckSearch(term)
	if err != nil {
		t.Fatalf("CheckSearch(%q): %v", term, err)
	}
	return timelinePage(t, f, tn, audit.Filter{Search: s}, beforeID)
}

// TestSearchFindsSealedEventsTheIndexHasNotReached: sealing leaves the
// name search's index to the indexer; between the two, a search finds the
// sealed events by their text (each once, below a cursor too, never
// another tenant's), and after indexing the same search finds the same
// events through the index, with events sealed later still found beside
// them.
func TestSearchFindsSealedEventsTheIndexHasNotReached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	other := f.tenant(t, "kenanga")
	f.namedEvent(t, tn, "1", "Katalog Kemarau")
	f.namedEvent(t, tn, "2", "Promo Natal")
	f.namedEvent(t, other, "3", "Katalog Kemarau")
	fourth := f.namedEvent(t, tn, "4", "Katalog Hujan")
	if res, err := f.sealer.SealOnce(ctx, true); err != nil || res.Sealed != 4 {
		t.Fatalf("seal: %+v, %v; want 4 events sealed", res, err)
	}
	if texts, words := f.searchIndexRows(t, tn); texts != 0 || words != 0 {
		t.Fatalf("sealing wrote %d search texts and %d postings: the indexer writes them", texts, words)
	}
	searches := func(when string) {
		t.Helper()
		for _, c := range []struct {
			term   string
			before int64
			want   []string
		}{
			{"katalog", 0, []string{"project.create 4", "project.create 1"}},
			{"kemarau", 0, []string{"project.create 1"}},
			{"katalog kemarau", 0, []string{"project.create 1"}},
			{"katalog", fourth.ID, []string{"project.create 1"}},
			{"natal", 0, []string{"project.create 2"}},
		} {
			if got := searchPage(t, f, tn, c.term, c.before); !slices.Equal(got, c.want) {
				t.Errorf("%s: search %q before %d = %q, want %q", when, c.term, c.before, got, c.want)
			}
		}
		if got := searchPage(t, f, other, "katalog", 0); !slices.Equal(got, []string{"project.create 3"}) {
			t.Errorf("%s: the other tenant's search = %q", when, got)
		}
	}
	searches("sealed, not indexed")

	// An indexer takes a tenant's events once the first has waited
	// IndexEvery, so that its batches gather.
	patient := audit.NewSealer(f.db.System, audit.SealerOptions{IndexEvery: time.Hour})
	if res, err := patient.IndexOnce(ctx); err != nil || res != (audit.IndexResult{}) {
		t.Fatalf("index of events sealed under an hour ago, with IndexEvery an hour: %+v, %v; want nothing", res, err)
	}
	if texts, words := f.searchIndexRows(t, tn); texts != 0 || words != 0 {
		t.Fatalf("the patient indexer wrote %d search texts and %d postings", texts, words)
	}
	eager := audit.NewSealer(f.db.System, audit.SealerOptions{IndexEvery: time.Nanosecond})
	res, err := eager.IndexOnce(ctx)
	if err != nil || res.Indexed != 4 || res.Held != 0 {
		t.Fatalf("index: %+v, %v; want the 4 leaves of both tenants", res, err)
	}
	if texts, words := f.searchIndexRows(t, tn); texts != 3 || words == 0 {
		t.Fatalf("after indexing: %d search texts and %d postings, want 3 texts and their words", texts, words)
	}
	var head, size int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT h.size, t.size FROM audit_search_heads h JOIN audit_trees t USING (tenant_id)
		WHERE h.tenant_id = $1`, tn).Scan(&head, &size); err != nil || head != 3 || size != 3 {
		t.Fatalf("index head %d, tree %d (%v); want both 3", head, size, err)
	}
	searches("indexed")
	// An event may be in the index and after its head (a migrated v1
	// event was indexed before it became a leaf): it is found once.
	if _, err := f.db.Admin.Exec(ctx, `UPDATE audit_search_heads SET size = 0 WHERE tenant_id = $1`, tn); err != nil {
		t.Fatal(err)
	}
	searches("indexed, the head behind")
	if res, err := eager.IndexOnce(ctx); err != nil || res.Indexed != 3 {
		t.Fatalf("index again after the head: %+v, %v; want its 3 leaves passed over (indexed already)", res, err)
	}
	if texts, _ := f.searchIndexRows(t, tn); texts != 3 {
		t.Fatalf("%d search texts after indexing twice, want 3", texts)
	}
	if res, err := eager.IndexOnce(ctx); err != nil || res != (audit.IndexResult{}) {
		t.Fatalf("index with nothing left: %+v, %v", res, err)
	}

	f.namedEvent(t, tn, "5", "Katalog Kemarau")
	if res, err := f.sealer.SealOnce(ctx, true); err != nil || res.Sealed != 1 {
		t.Fatalf("seal: %+v, %v", res, err)
	}
	if got, want := searchPage(t, f, tn, "kemarau", 0), []string{"project.create 5", "project.create 1"}; !slices.Equal(got, want) {
		t.Errorf("search over the index and a leaf after its head = %q, want %q", got, want)
	}
}

// TestSealingWaitsForNoIndexer: with the name search's index unwritable
// (its text table locked against writes by an open transaction, as a long
// index merge would hold it up), events are still sealed, and the indexer
// catches up once it can write.
func TestSealingWaitsForNoIndexer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	f.namedEvent(t, tn, "1", "Katalog Kemarau")
	f.namedEvent(t, tn, "2", "Promo Natal")

	lock, err := f.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE audit_search IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if res, err := f.sealer.SealOnce(sctx, true); err != nil || res.Sealed != 2 || res.Signed != 1 {
		t.Fatalf("seal with the search index locked: %+v, %v; want 2 events sealed and signed", res, err)
	}

	done := make(chan audit.IndexResult, 1)
	eager := audit.NewSealer(f.db.System, audit.SealerOptions{IndexEvery: time.Nanosecond})
	go func() {
		res, err := eager.IndexOnce(ctx)
		if err != nil {
			t.Errorf("index: %v", err)
		}
		done <- res
	}()
	testwait.For(t, "the indexer to wait for the lock on audit_search", func() bool {
		var waiting int
		if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE NOT granted AND relation = 'audit_search'::regclass`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Indexed != 2 {
		t.Fatalf("index after the lock: %+v, want 2 leaves", res)
	}
	if texts, _ := f.searchIndexRows(t, tn); texts != 2 {
		t.Fatalf("%d search texts after indexing, want 2", texts)
	}
}

// TestRunIndexesBesideSealing: a running sealer also keeps the name
// search's index up with what it sealed.
func TestRunIndexesBesideSealing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	tn := f.tenant(t, "melati")
	sealer := audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer, IndexEvery: 10 * time.Millisecond})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		sealer.Run(ctx, 10*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	f.namedEvent(t, tn, "1", "Katalog Kemarau")
	f.namedEvent(t, tn, "2", "Promo Natal")
	testwait.For(t, "both events sealed and indexed", func() bool {
		texts, _ := f.searchIndexRows(t, tn)
		return texts == 2 && f.unsealed(t, tn) == 0
	})
}

// TestSearchReadsOnlyTheLeavesAfterTheIndex: a name search looks for the
// events sealed since the indexer's head among those leaves alone, never
// by scanning every sealed event (the head as a subquery left the planner
// guessing a third of the tenant's leaves, and at 10M events the search
// scanned them all, a second a page). The tenant's sealed events carry
// statistics, as a busy tenant's do.
func TestSearchReadsOnlyTheLeavesAfterTheIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	if _, err := f.db.Admin.Exec(ctx, `INSERT INTO audit_unsealed (tenant_id, actor_kind, action, entity, entity_id, detail, occurred_at)
		SELECT $1, 'system', 'project.create', 'project', g::text, jsonb_build_object('name', 'Proyek ' || g), now()
		  FROM generate_series(1, 5000) g`, tn); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	f.namedEvent(t, tn, "kemarau", "Katalog Kemarau")
	if _, err := f.sealer.SealOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Admin.Exec(ctx, `ANALYZE audit_sealed, audit_leaves, audit_search, audit_words, audit_search_heads`); err != nil {
		t.Fatal(err)
	}
	s, err := audit.CheckSearch("katalog kemarau")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	var scans int64
	err = database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) error {
		p, err := audit.Timeline(ctx, tx, tn, audit.Filter{Search: s}, 0, 50)
		if err != nil {
			return err
		}
		for _, e := range p.Rows {
			found = append(found, e.EntityID)
		}
		return tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('public.audit_sealed'::regclass)`).Scan(&scans)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{"kemarau"}) {
		t.Errorf("search found %v, want the event sealed after the index's head", found)
	}
	if scans != 0 {
		t.Errorf("the search scanned audit_sealed whole %d times, want none", scans)
	}
}
