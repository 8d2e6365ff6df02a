package web

import (
	"context"
	"sync"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// An audit row's sentence and pretty-printed detail depend only on the
// event, which never changes, the names read with it and the reader's
// language; decoding the detail and formatting the sentence were most of a
// trail page's per-row work. The trail is read again and again (every
// htmx refresh renders the same newest events), so each event's words are
// made once per language and kept. The key holds the names too: a user
// who renames themselves gets new words, and the old ones age out.
type wordsKey struct {
	tenant, id              int64
	lang, actor, entityUser string
}

type rowWords struct {
	sentence []components.Segment // shared: readers must not modify it
	detail   string
}

// wordsPerGeneration bounds the cache: at most two generations are held,
// so at most 2 × wordsPerGeneration events' words (a few hundred bytes
// each, a detail is at most a few kilobytes).
const wordsPerGeneration = 4096

// wordCache holds the words of recently shown events in two generations:
// when the current one is full it becomes the old one and the old one is
// dropped, and a hit in the old one moves forward. A page's events stay
// while it is read; memory stays bounded without per-entry bookkeeping.
type wordCache struct {
	mu       sync.Mutex
	cur, old map[wordsKey]rowWords
}

func (c *wordCache) get(k wordsKey) (rowWords, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.cur[k]; ok {
		return w, true
	}
	w, ok := c.old[k]
	if ok {
		c.putLocked(k, w)
	}
	return w, ok
}

func (c *wordCache) put(k wordsKey, w rowWords) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, w)
}

func (c *wordCache) putLocked(k wordsKey, w rowWords) {
	if c.cur == nil || len(c.cur) >= wordsPerGeneration {
		c.old, c.cur = c.cur, make(map[wordsKey]rowWords, wordsPerGeneration)
	}
	c.cur[k] = w
}

// words returns e's sentence (for a row naming its actor actorName) and
// its pretty-printed detail in the reader's language, made once per event.
func (c *wordCache) words(ctx context.Context, e audit.Recorded, actorName string) rowWords {
	k := wordsKey{tenant: e.TenantID, id: e.ID, lang: i18n.Lang(ctx), actor: actorName, entityUser: e.EntityUserName}
	if w, ok := c.get(k); ok {
		return w
	}
	w := rowWords{sentence: sentence(ctx, e, actorName), detail: prettyJSON(e.Detail)}
	c.put(k, w)
	return w
}
