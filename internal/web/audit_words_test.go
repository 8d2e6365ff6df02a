package web

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

func wordsText(segs []components.Segment) string {
	var s string
	for _, g := range segs {
		s += g.Text
	}
	return s
}

// TestWordCacheKeysEverythingTheWordsDependOn: the cached words of an event
// are what sentence and prettyJSON say for it in the reader's language with
// the names read with it, whichever was asked first, and the cache stays
// within two generations however many events pass through it.
func TestWordCacheKeysEverythingTheWordsDependOn(t *testing.T) {
	en, id := i18n.WithLang(context.Background(), i18n.EN), i18n.WithLang(context.Background(), i18n.ID)
	uid := int64(7)
	e := audit.Recorded{ID: 42, Event: audit.Event{TenantID: 3, ActorKind: audit.ActorUser, ActorID: &uid,
		Action: "member.remove", Entity: "user", EntityID: "9", Detail: json.RawMessage(`{"email":"b@example.com"}`)}}
	e.EntityUserName = "Budi"
	var c wordCache
	check := func(ctx context.Context, e audit.Recorded, actor string) {
		t.Helper()
		got := c.words(ctx, e, actor)
		want := sentence(ctx, e, actor)
		if wordsText(got.sentence) != wordsText(want) || got.detail != prettyJSON(e.Detail) {
			t.Fatalf("words for lang %s actor %q entity user %q: %q / %q, want %q / %q", i18n.Lang(ctx), actor, e.EntityUserName,
				wordsText(got.sentence), got.detail, wordsText(want), prettyJSON(e.Detail))
		}
		if len(want) == 0 {
			t.Fatal("member.remove has no sentence: the check would pass on empty words")
		}
	}
	check(en, e, "Ani")
	check(id, e, "Ani") // another language
	check(en, e, "Ani Baru")
	renamed := e
	renamed.EntityUserName = "Budi Baru"
	check(en, renamed, "Ani")
	other := e
	other.TenantID = 4 // the same id in another tenant's rows is another event
	other.Action = "project.create"
	other.Entity, other.EntityID, other.Detail = "project", "1", json.RawMessage(`{"name":"Katalog"}`)
	check(en, other, "Ani")
	check(en, e, "Ani") // still the first words

	for i := range 3 * wordsPerGeneration {
		n := e
		n.ID = int64(1000 + i)
		c.words(en, n, "Ani")
	}
	if held := len(c.cur) + len(c.old); held > 2*wordsPerGeneration {
		t.Fatalf("cache holds %d events' words, more than two generations of %d", held, wordsPerGeneration)
	}
	check(en, e, "Ani") // aged out and made again
}
