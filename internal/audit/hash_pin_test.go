package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

// TestEventHashPinnedAndCoversEveryField pins the hash of one fixed event,
// so changing the encoding (dropping a field, reordering, changing a
// width) fails here, and checks that changing any single field changes
// the hash.
func TestEventHashPinnedAndCoversEveryField(t *testing.T) {
	actor, job := int64(7), int64(99)
	base := func() chainFields {
		a, j := actor, job
		return chainFields{
			TenantID: 3, Seq: 42, ActorKind: "user", ActorID: &a, Action: "project.create",
			Entity: "project", EntityID: "12", DetailText: `{"name": "Gudang"}`,
			OccurredAt: time.Date(2026, 2, 2, 2, 0, 0, 123456000, time.UTC), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			JobID: &j, PrevHash: bytes.Repeat([]byte{0xab}, 32), V1: true,
		}
	}
	f := base()
	const pinned = "54901e2d3a8afeab521fabd4532df80aea1a777d7a268cbce1a1166f1c338f98"
	got := hex.EncodeToString(eventHash(&f))
	if got != pinned {
		t.Fatalf("hash of the fixed event = %s, pinned %s: the chain encoding changed (old chains would no longer verify)", got, pinned)
	}
	other, otherJob := int64(8), int64(100)
	mutations := map[string]func(*chainFields){
		"tenant_id":    func(c *chainFields) { c.TenantID = 4 },
		"seq":          func(c *chainFields) { c.Seq = 43 },
		"actor_kind":   func(c *chainFields) { c.ActorKind = "staff" },
		"actor_id":     func(c *chainFields) { c.ActorID = &other },
		"actor_id nil": func(c *chainFields) { c.ActorID = nil },
		"action":       func(c *chainFields) { c.Action = "project.delete" },
		"entity":       func(c *chainFields) { c.Entity = "projects" },
		"entity_id":    func(c *chainFields) { c.EntityID = "13" },
		"detail":       func(c *chainFields) { c.DetailText = `{"name": "Gudang2"}` },
		"occurred_at":  func(c *chainFields) { c.OccurredAt = c.OccurredAt.Add(time.Microsecond) },
		"trace_id":     func(c *chainFields) { c.TraceID = "4bf92f3577b34da6a3ce929d0e0e4737" },
		"job_id":       func(c *chainFields) { c.JobID = &otherJob },
		"job_id nil":   func(c *chainFields) { c.JobID = nil },
		"prev_hash":    func(c *chainFields) { c.PrevHash = bytes.Repeat([]byte{0xac}, 32) },
	}
	for name, mutate := range mutations {
		m := base()
		mutate(&m)
		if hex.EncodeToString(eventHash(&m)) == pinned {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
}

// TestEntryEncodingPinnedAndCoversEveryField pins the log entry (v2) of one
// fixed event and its RFC 6962 leaf hash, and checks that changing any
// single field changes the entry.
func TestEntryEncodingPinnedAndCoversEveryField(t *testing.T) {
	actor, job := int64(7), int64(99)
	base := func() chainFields {
		a, j := actor, job
		return chainFields{
			TenantID: 3, Seq: 42, ID: 1234, ActorKind: "user", ActorID: &a, Action: "project.create",
			Entity: "project", EntityID: "12", DetailText: `{"name": "Gudang"}`,
			OccurredAt: time.Date(2026, 2, 2, 2, 0, 0, 123456000, time.UTC), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			JobID: &j,
		}
	}
	f := base()
	entry := f.encode()
	if !bytes.HasPrefix(entry, append([]byte{0, 0, 0, 14}, "jejak-audit-v2"...)) {
		t.Fatalf("entry does not start with its length-prefixed version: %x", entry[:18])
	}
	leaf := sha256.Sum256(append([]byte{0}, entry...))
	const pinned = "92f9b8c568b9c584"
	if got := hex.EncodeToString(leaf[:8]); got != pinned {
		t.Fatalf("leaf hash of the fixed event starts %s, pinned %s: the entry encoding changed (sealed logs would no longer verify)", got, pinned)
	}
	other, otherJob := int64(8), int64(100)
	mutations := map[string]func(*chainFields){
		"tenant_id":    func(c *chainFields) { c.TenantID = 4 },
		"seq":          func(c *chainFields) { c.Seq = 43 },
		"id":           func(c *chainFields) { c.ID = 1235 },
		"actor_kind":   func(c *chainFields) { c.ActorKind = "staff" },
		"actor_id":     func(c *chainFields) { c.ActorID = &other },
		"actor_id nil": func(c *chainFields) { c.ActorID = nil },
		"action":       func(c *chainFields) { c.Action = "project.delete" },
		"entity":       func(c *chainFields) { c.Entity = "projects" },
		"entity_id":    func(c *chainFields) { c.EntityID = "13" },
		"detail":       func(c *chainFields) { c.DetailText = `{"name": "Gudang2"}` },
		"occurred_at":  func(c *chainFields) { c.OccurredAt = c.OccurredAt.Add(time.Microsecond) },
		"trace_id":     func(c *chainFields) { c.TraceID = "4bf92f3577b34da6a3ce929d0e0e4737" },
		"job_id":       func(c *chainFields) { c.JobID = &otherJob },
		"job_id nil":   func(c *chainFields) { c.JobID = nil },
		"version":      func(c *chainFields) { c.V1 = true },
	}
	for name, mutate := range mutations {
		m := base()
		mutate(&m)
		if bytes.Equal(m.encode(), entry) {
			t.Errorf("changing %s does not change the entry", name)
		}
	}
}
