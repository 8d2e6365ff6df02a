package console_test

import (
	"context"
	"testing"

	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook/webhooktest"
)

// TestDeadLetterEventsMatchTheCatalog: the job.dead_letter.retried and
// .discarded payloads an operator's action really publishes fit the
// webhook catalog's schemas, checked with a JSON Schema implementation
// Jejak did not write.
func TestDeadLetterEventsMatchTheCatalog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 1)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	c := newConsole(db, e, nil)
	ctx := context.Background()
	op := console.Operator{UserID: staff, Confirmed: true}
	retried, discarded := deadJob(t, db, e, tenants[0]), deadJob(t, db, e, tenants[0])
	if _, err := c.Act(ctx, op, console.ActionRetry, retried, "fixed the template"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Act(ctx, op, console.ActionDiscard, discarded, "customer left"); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Admin.Query(ctx, `SELECT event_type, payload::text FROM outbox_messages WHERE event_type LIKE 'job.dead_letter.%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var typ, payload string
		if err := rows.Scan(&typ, &payload); err != nil {
			t.Fatal(err)
		}
		seen[typ] = true
		if err := webhooktest.Conforms(typ, []byte(payload)); err != nil {
			t.Errorf("published %s %s: %v", typ, payload, err)
		}
	}
	if !seen["job.dead_letter.retried"] || !seen["job.dead_letter.discarded"] {
		t.Fatalf("published: %v", seen)
	}
}
