package audit

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestASealBatchFailsWholeUnlessEveryQueuedEventMoves: the batch's write
// is sent with the COMMIT and its result never read, so the statement
// itself refuses a batch whose queued events are not all in the queue
// (here one that never was): no leaf of an event that did not move is
// written, and the tree does not grow.
func TestASealBatchFailsWholeUnlessEveryQueuedEventMoves(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantID int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('melati', 'Melati') RETURNING id`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	q := newStore(db.System)
	var empty tlog.Hash
	if err := q.createTree(ctx, tenantID, empty[:]); err != nil {
		t.Fatal(err)
	}
	leaf := tlog.RecordHash([]byte("no such event"))
	err := q.seal(ctx, sealWrite{TenantID: tenantID, Zone: "UTC", Size: 1, Root: leaf[:],
		Seqs: []int64{1}, LeafEventIds: []int64{999}, Hashes: [][]byte{leaf[:]}, QueuedIds: []int64{999}})
	if err == nil || !strings.Contains(err.Error(), "moved 0 of 1") {
		t.Fatalf("sealing an event not in the queue: %v, want the statement to refuse it", err)
	}
	var leaves, size int64
	if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_leaves WHERE tenant_id = $1),
		(SELECT size FROM audit_trees WHERE tenant_id = $1)`, tenantID).Scan(&leaves, &size); err != nil {
		t.Fatal(err)
	}
	if leaves != 0 || size != 0 {
		t.Fatalf("after the refused batch: %d leaves, tree size %d; want none and 0", leaves, size)
	}
}
