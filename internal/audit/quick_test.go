package audit_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// trailStory writes a small tenant story and returns the tenant, the
// owner and a staff user: a project created, deleted and created again
// under the same name, a plan change, a sign-in, a job and a staff read,
// and one event of another tenant that names the same project.
func trailStory(t *testing.T, f *fixture) (tn, owner, staff int64) {
	t.Helper()
	tn, other := f.tenant(t, "melati"), f.tenant(t, "senja")
	owner = f.user(t, "budi@melati.test", tn)
	staff = f.user(t, "sinta@jejak.test", 0)
	otherOwner := f.user(t, "sari@senja.test", other)
	user := func(tenant, id int64, action, entity, eid, detail string) {
		f.clk.Advance(time.Minute)
		f.record(t, audit.Event{TenantID: tenant, ActorKind: audit.ActorUser, ActorID: &id, Action: action,
			Entity: entity, EntityID: eid, Detail: json.RawMessage(detail)})
	}
	user(tn, owner, "project.create", "project", "8", `{"name": "Katalog Musim Hujan"}`)
	user(tn, owner, "project.create", "project", "9", `{"name": "Lookbook Lebaran"}`)
	user(tn, owner, "project.delete", "project", "8", `{"name": "Katalog Musim Hujan"}`)
	user(tn, owner, "subscription.change", "subscription", "1", `{"from_plan": "pro", "to_plan": "basic"}`)
	user(tn, owner, "auth.signin", "user", "1", `{"ip": "203.0.113.7"}`)
	user(tn, owner, "project.create", "project", "12", `{"name": "Katalog Musim Hujan"}`)
	// A name with LIKE's wildcards in it must match only literally.
	user(tn, owner, "project.create", "project", "13", `{"name": "Diskon 50%_off"}`)
	f.clk.Advance(time.Minute)
	f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "job.dead_lettered", Entity: "job",
		EntityID: "48", Detail: json.RawMessage(`{"kind": "email.weekly-report"}`)})
	f.clk.Advance(time.Minute)
	f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorStaff, ActorID: &staff, Action: "staff.viewed_audit",
		Entity: "audit", EntityID: "1"})
	user(other, otherOwner, "project.create", "project", "8", `{"name": "Katalog Musim Hujan"}`)
	return tn, owner, staff
}

// timelineActions reads a tenant's whole filtered timeline (newest first)
// as action/entity id pairs.
func timelineActions(t *testing.T, f *fixture, tn int64, flt audit.Filter) []string {
	t.Helper()
	return timelinePage(t, f, tn, flt, 0)
}

// timelinePage is timelineActions below beforeID (0: from the newest).
func timelinePage(t *testing.T, f *fixture, tn int64, flt audit.Filter, beforeID int64) []string {
	t.Helper()
	var out []string
	err := database.InTenantTx(context.Background(), f.db.App, tn, func(tx pgx.Tx) error {
		p, err := audit.Timeline(context.Background(), tx, tn, flt, beforeID, 50)
		for _, e := range p.Rows {
			out = append(out, e.Action+" "+e.EntityID)
		}
		return err
	})
	if err != nil {
		t.Fatalf("timeline %+v: %v", flt, err)
	}
	return out
}

// TestQuickFilters: each quick filter returns exactly the events of its
// kind, in this tenant only.
func TestQuickFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, _, _ := trailStory(t, f)
	cases := map[audit.QuickFilter][]string{
		audit.QuickDeletions: {"project.delete 8"},
		audit.QuickBilling:   {"subscription.change 1"},
		audit.QuickSignins:   {"auth.signin 1"},
		audit.QuickJobs:      {"job.dead_lettered 48"},
		audit.QuickStaff:     {"staff.viewed_audit 1"},
		audit.QuickAccess:    nil,
	}
	for q, want := range cases {
		var flt audit.Filter
		flt.Quick(q)
		if got := timelineActions(t, f, tn, flt); !slices.Equal(got, want) {
			t.Errorf("quick filter %s = %v, want %v", q, got, want)
		}
	}
	if audit.ValidQuickFilter("project.delete") || !audit.ValidQuickFilter(audit.QuickJobs) {
		t.Error("ValidQuickFilter accepts an action or refuses a quick filter")
	}
	// Every action Jejak writes is known, and the quick filters only name
	// known actions.
	for _, q := range audit.QuickFilters() {
		for _, a := range audit.QuickActions(q) {
			if !audit.KnownAction(a) {
				t.Errorf("quick filter %s names unknown action %s", q, a)
			}
		}
	}
	if !audit.KnownAction("job.rescued") || audit.KnownAction("project.rename") {
		t.Error("KnownAction does not follow the registry")
	}
}

// TestNameSearch: a search finds the events whose details name the term,
// case-insensitively and anywhere in the name, never another tenant's;
// LIKE's wildcards in the term match only themselves; a term too short to
// use the index is refused before any read.
func TestNameSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, _, _ := trailStory(t, f)
	search := func(term string) []string {
		t.Helper()
		s, err := audit.CheckSearch(term)
		if err != nil {
			t.Fatalf("CheckSearch(%q): %v", term, err)
		}
		return timelineActions(t, f, tn, audit.Filter{Search: s})
	}
	katalog := []string{"project.create 12", "project.delete 8", "project.create 8"}
	if got := search("Katalog"); !slices.Equal(got, katalog) {
		t.Errorf(`search "Katalog" = %v, want %v`, got, katalog)
	}
	// The filters hold on the queue's events too.
	s, _ := audit.CheckSearch("Katalog")
	if got := timelineActions(t, f, tn, audit.Filter{Search: s, Action: "project.delete"}); !slices.Equal(got, []string{"project.delete 8"}) {
		t.Errorf(`search "Katalog" among project.delete = %v`, got)
	}
	// Unsealed, the events were found through the sealer's queue; the
	// sealer indexes them as it seals, and the rest of the test searches
	// that index (and the queue, for an event recorded after sealing).
	var indexed int
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM audit_search WHERE tenant_id = $1`, tn).Scan(&indexed); err != nil || indexed != 0 {
		t.Fatalf("search text of unsealed events: %d rows (%v), want none: writers must not index", indexed, err)
	}
	f.seal(t)
	// Only the events with a name: the rest ('[]') no term can match.
	var named, nameless int
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE audit_search_text(detail) <> '[]'),
		count(*) FILTER (WHERE audit_search_text(detail) = '[]') FROM audit_events WHERE tenant_id = $1`, tn).Scan(&named, &nameless); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM audit_search WHERE tenant_id = $1`, tn).Scan(&indexed); err != nil ||
		indexed == 0 || indexed != named || nameless == 0 {
		t.Fatalf("sealing indexed %d events (%v), want the %d with a name of %d", indexed, err, named, named+nameless)
	}
	f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "project.create", Entity: "project",
		EntityID: "99", Detail: []byte(`{"name":"Katalog Kemarau"}`)})
	katalog = append([]string{"project.create 99"}, katalog...)
	if got := search("Katalog"); !slices.Equal(got, katalog) {
		t.Errorf(`search "Katalog" over sealed and unsealed events = %v, want %v`, got, katalog)
	}
	katalog = katalog[1:]
	if got := search("  musim HUJAN "); !slices.Equal(got, katalog) {
		t.Errorf(`search "musim HUJAN" = %v, want %v`, got, katalog)
	}
	if got := search("weekly-report"); !slices.Equal(got, []string{"job.dead_lettered 48"}) {
		t.Errorf(`search "weekly-report" = %v`, got)
	}
	if got := search("50%_"); !slices.Equal(got, []string{"project.create 13"}) {
		t.Errorf(`search "50%%_" = %v`, got)
	}
	for _, wild := range []string{"n%n", "i_k", `s\k`} {
		if got := search(wild); len(got) != 0 {
			t.Errorf("search %q = %v, want none (LIKE wildcards match only themselves)", wild, got)
		}
	}
	// A key of the detail is not a name.
	if got := search("from_plan"); len(got) != 0 {
		t.Errorf(`search "from_plan" = %v, want none`, got)
	}
	// Search combines with the other filters.
	var flt audit.Filter
	flt.Quick(audit.QuickDeletions)
	flt.Search, _ = audit.CheckSearch("katalog")
	if got := timelineActions(t, f, tn, flt); !slices.Equal(got, []string{"project.delete 8"}) {
		t.Errorf("deletions of katalog = %v", got)
	}
	for _, bad := range []string{"", "ab", "  k  ", string(make([]rune, 101))} {
		if _, err := audit.CheckSearch(bad); !errors.Is(err, audit.ErrSearchLength) || apperr.CodeOf(err) != apperr.CodeInvalid {
			t.Errorf("CheckSearch(%q) = %v, want ErrSearchLength", bad, err)
		}
	}
}

// TestSearchFunctionsStayInTheirTenant: the owner-run search and namesake
// functions answer only for the tenant and member the transaction is
// scoped to; outside a tenant scope, or for a user who is not a member,
// they find nothing.
func TestSearchFunctionsStayInTheirTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, owner, staff := trailStory(t, f)
	ctx := context.Background()
	const search = `SELECT count(*) FROM audit_search_ids('%katalog%', NULL, 50, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`
	const namesakes = `SELECT count(*) FROM audit_namesakes('project', 'Katalog Musim Hujan')`
	count := func(db database.Querier, sql string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	if n := count(f.db.System, search) + count(f.db.System, namesakes); n != 0 {
		t.Errorf("outside a tenant scope the functions found %d rows", n)
	}
	scoped := func(user int64) (hits, ids int) {
		err := database.InTenantUserTx(ctx, f.db.App, tn, user, func(tx pgx.Tx) error {
			hits, ids = count(tx, search), count(tx, namesakes)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return hits, ids
	}
	if hits, ids := scoped(owner); hits != 3 || ids != 2 {
		t.Errorf("a member finds %d events and %d namesake ids, want 3 and 2", hits, ids)
	}
	if hits, ids := scoped(staff); hits != 0 || ids != 0 {
		t.Errorf("a non-member finds %d events and %d namesake ids, want none", hits, ids)
	}
}

// TestEntityHistoryByName: a project deleted and created again under the
// same name is one story, titled by its name, from either id; another
// tenant's namesake stays out; the timeline names the actor in the same
// read.
func TestEntityHistoryByName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, owner, _ := trailStory(t, f)
	svc := audit.NewService(f.db.App, f.db.System)
	for _, id := range []string{"8", "12"} {
		h, err := svc.EntityHistory(context.Background(), tn, "project", id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range h.Events {
			got = append(got, e.Action+" "+e.EntityID)
			if e.ActorName != "budi@melati.test" || *e.ActorID != owner {
				t.Errorf("event %d actor name %q", e.ID, e.ActorName)
			}
		}
		want := []string{"project.create 8", "project.delete 8", "project.create 12"}
		if h.Name != "Katalog Musim Hujan" || !slices.Equal(got, want) {
			t.Errorf("history of project %s = %q %v, want %v", id, h.Name, got, want)
		}
	}
	h, err := svc.EntityHistory(context.Background(), tn, "project", "9")
	if err != nil || h.Name != "Lookbook Lebaran" || len(h.Events) != 1 {
		t.Errorf("history of project 9 = %+v, %v", h, err)
	}
}

// TestNameSearchBelowTheWindow: the search takes the postings of the
// term's rarest usable word when it is rare, or else walks a window of the
// newest sealed events and takes the trigram index below it. With the
// window and the rareness cap set to one or two events or to the whole
// trail (jejak.search_window, jejak.search_word_cap), every term, page
// size, cursor and another filter give what one walk of the whole trail
// gives, newest first.
func TestNameSearchBelowTheWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn, owner, _ := trailStory(t, f)
	for id, name := range map[string]string{"77": "Katalog Kemarau", "78": "Senja Senjakala", "79": "katalog musim semi",
		"80": "Promo Katalog Musim 4242", "81": "promo katalog musim 42", "82": "Katalog-Musim Kering 420"} {
		f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "project.create", Entity: "project",
			EntityID: id, Detail: []byte(`{"name":"` + name + `"}`)})
	}
	f.seal(t)
	ctx := context.Background()
	type settings struct{ window, wordCap string }
	ids := func(s settings, pattern string, before any, lim int, action any) []int64 {
		t.Helper()
		var out []int64
		err := database.InTenantUserTx(ctx, f.db.App, tn, owner, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('jejak.search_window', $1, true), set_config('jejak.search_word_cap', $2, true)`,
				s.window, s.wordCap); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT * FROM audit_search_ids($1, $2, $3, NULL, $4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
				pattern, before, lim, action)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	whole := settings{"100000", "1"}
	newestFirst := func(a, b int64) int { return cmp.Compare(b, a) }
	// Terms whose usable words are whole words, prefixes, several words
	// sharing a prefix in one event, none at all (one word; a word cut
	// on its left), and a word no event has; pairs of words, whole and
	// prefix, across another separator than the term's, and a pair
	// whose words are in the trail but never adjacent.
	terms := map[string]int{`%katalog%`: 8, `%katalog musim%`: 6, `%atalog musim 42%`: 2, `%musim hujan%`: 3,
		`%katalog mus%`: 6, `% senja%`: 1, `%senja senja%`: 1, `%x senja%`: 0, `%talog kemarau%`: 1, `%musim 4242%`: 1,
		`% katalog musim %`: 2, `%o katalog mu%`: 2, `%"katalog-musim k%`: 1, `%g musim kering%`: 0, `%m kering 42%`: 1,
		`% musim 42%`: 2, `%"katalog kemarau%`: 1, `% kemarau senja%`: 0}
	for pattern, n := range terms {
		all := ids(whole, pattern, nil, 50, nil)
		if len(all) != n || !slices.IsSortedFunc(all, newestFirst) {
			t.Fatalf("%s with a whole-trail window = %v, want %d ids newest first", pattern, all, n)
		}
		for _, s := range []settings{{"1", "1"}, {"2", "1"}, {"1", "100000"}, {"2", "100000"}} {
			for lim := 1; lim <= 5; lim++ {
				if got := ids(s, pattern, nil, lim, nil); !slices.Equal(got, all[:min(lim, len(all))]) {
					t.Errorf("%s %+v, limit %d: %v, want %v", pattern, s, lim, got, all[:min(lim, len(all))])
				}
			}
			if len(all) > 2 {
				if got := ids(s, pattern, all[1], 50, nil); !slices.Equal(got, all[2:]) {
					t.Errorf("%s %+v below %d: %v, want %v", pattern, s, all[1], got, all[2:])
				}
			}
			want := ids(whole, pattern, nil, 50, "project.delete")
			if got := ids(s, pattern, nil, 50, "project.delete"); !slices.Equal(got, want) {
				t.Errorf("%s %+v with an action filter: %v, want %v", pattern, s, got, want)
			}
		}
	}
	if got := ids(whole, `%katalog musim%`, nil, 50, "project.delete"); len(got) != 1 {
		t.Errorf("katalog musim with the deletion filter: %v, want the one deletion", got)
	}
}

// TestSearchPairsOfEventsSealedBefore: events sealed while the search's
// keys were single words (migration 143) get their word pairs from the
// migration that brought pairs, so a search by a pair finds them; a
// nameless event's search text is dropped.
func TestSearchPairsOfEventsSealedBefore(t *testing.T) {
	t.Parallel()
	db := testdb.NewAt(t, 143)
	ctx := context.Background()
	var tn int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('melati', 'Melati') RETURNING id").Scan(&tn); err != nil {
		t.Fatal(err)
	}
	// Written as a writer at migration 143 wrote them: a plain insert, which
	// that schema's trigger queued for the sealer.
	if _, err := db.System.Exec(ctx, `INSERT INTO audit_events (tenant_id, actor_kind, action, entity, entity_id, detail, occurred_at)
		VALUES ($1, 'system', 'project.create', 'project', '1', '{"name": "Katalog Musim 42"}', now()),
		       ($1, 'system', 'project.create', 'project', '1', '{"name": "Promo Natal 4200"}', now()),
		       ($1, 'system', 'system.daily-export', 'tenant', '1', '{"rows": 3}', now())`, tn); err != nil {
		t.Fatal(err)
	}
	// Sealed as that schema's sealer indexed them for the search: each
	// event's text, and the text's single words (today's sealer cannot run
	// on that schema).
	if _, err := db.System.Exec(ctx, `WITH added AS (
		INSERT INTO audit_search (tenant_id, event_id, text)
		SELECT e.tenant_id, e.id, audit_search_text(e.detail) FROM audit_events e WHERE e.tenant_id = $1
		RETURNING tenant_id, event_id, text)
		INSERT INTO audit_words (tenant_id, word, event_id)
		SELECT a.tenant_id, w, a.event_id FROM added a, unnest(audit_search_words(a.text)) AS w`, tn); err != nil {
		t.Fatal(err)
	}
	if err := database.Migrate(ctx, db.URL); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Admin.Query(ctx, "SELECT word FROM audit_words WHERE tenant_id = $1 AND word LIKE '% %' ORDER BY word", tn)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if want := []string{"katalog musim", "musim 42", "natal 4200", "promo natal"}; err != nil || !slices.Equal(pairs, want) {
		t.Fatalf("pairs after the migration = %q, %v; want %q", pairs, err, want)
	}
	// And the nameless event's search text is gone (no term can match it).
	var texts int
	if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM audit_search WHERE tenant_id = $1", tn).Scan(&texts); err != nil || texts != 2 {
		t.Fatalf("search texts after the migration: %d (%v), want the 2 named events'", texts, err)
	}
}
