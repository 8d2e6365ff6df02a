package components_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/golden"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// goldenAuditRows are events that reach every branch of an event's line:
// a sentence with and without its object, the entity's history link, an
// unsealed event, an action without a sentence, the record in place with
// every field or fetched when opened, and text that must be escaped.
func goldenAuditRows() []components.AuditRow {
	job := int64(77)
	base := components.AuditRow{
		ID: 41, Seq: 12, Time: "Sen 10 Nov 2026 14:05 WIB", Clock: "14:05", TimeISO: "2026-11-10T07:05:00Z",
		ActorKind: "user", ActorName: `Budi "B" <Santoso>`, ActorID: 3, Action: "project.created",
		Entity: "project", EntityID: "9", Rel: "5 min ago", DayKey: "2026-11-10", Day: "Today",
		RecordURL: "/t/melati/audit/record/41?x=1&y=2",
		Sentence: []components.Segment{{Kind: "actor", Text: `Budi "B" <Santoso>`}, {Kind: "text", Text: " created "},
			{Kind: "object", Text: "project <Alpha & Co>"}},
		EntityURL: "/t/melati/audit?entity=project&entity_id=9",
	}
	noObject := base
	noObject.Sentence = []components.Segment{{Kind: "actor", Text: "Budi"}, {Kind: "text", Text: " signed in"}}
	unsealed := base
	unsealed.Seq, unsealed.ID = 0, 42
	noURL := base
	noURL.EntityURL, noURL.Rel, noURL.DayKey = "", "", ""
	raw := base
	raw.Sentence, raw.ActorKind, raw.ActorName = nil, "staff", ""
	inPlace := base
	inPlace.RecordURL, inPlace.Open, inPlace.Detail, inPlace.TraceID, inPlace.JobID = "", true, "{\n  \"name\": \"<b>\"\n}", "4bf92f3577b34da6a3ce929d0e0e4736", &job
	inPlace.ProofURL = "/t/melati/audit/log/bundle?seq=12"
	rawInPlace := raw
	rawInPlace.RecordURL, rawInPlace.Seq, rawInPlace.ActorKind = "", 0, "system"
	anon := raw
	anon.ActorKind, anon.ActorName, anon.EntityURL = "user", "", ""
	return []components.AuditRow{base, noObject, unsealed, noURL, raw, inPlace, rawInPlace, anon}
}

// TestAuditEventGolden: each event renders byte for byte as recorded in
// testdata, in both languages (recorded from the templ component the
// hand-written one replaced; -update-golden rewrites them).
func TestAuditEventGolden(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"en", "id"} {
		var b strings.Builder
		ctx := i18n.WithLang(context.Background(), lang)
		for _, r := range goldenAuditRows() {
			if err := components.AuditEvent(r).Render(ctx, &b); err != nil {
				t.Fatal(err)
			}
			b.WriteString("\n")
		}
		golden.Check(t, filepath.Join("testdata", "auditevent_"+lang+".golden"), b.String())
	}
}

func BenchmarkAuditEvent(b *testing.B) {
	rows := goldenAuditRows()[:3]
	ctx := i18n.WithLang(context.Background(), "en")
	var sb strings.Builder
	for b.Loop() {
		sb.Reset()
		for _, r := range rows {
			if err := components.AuditEvent(r).Render(ctx, &sb); err != nil {
				b.Fatal(err)
			}
		}
	}
}
