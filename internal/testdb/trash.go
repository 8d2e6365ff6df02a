package testdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"
)

// PostgreSQL 15 forces an immediate checkpoint on every DROP DATABASE, so
// pgtestdb's own cleanup (drop at the end of each passing test) held a
// parallel test slot for a flush of every dirty buffer on the shared
// server: about a second per test under load, longer than cloning. A
// passing test's database is instead marked as trash (a comment on the
// database: one catalog row, no waiting) and dropped by one goroutine per
// test binary, up to four at a time so that concurrent drops share a
// checkpoint. A binary that exits first leaves its marked databases to the
// next binary's sweep; the mark is what makes a database safe to drop from
// another process, since only a finished test's database carries it. A
// failing test's database is never marked: it is kept for inspection.

const trashMark = "jejak-test-trash"

// ownCleanup hands pgtestdb a TB whose Cleanup is dropped: pgtestdb's
// cleanup would close a connection Custom already closed and drop the
// database, which discard does instead.
type ownCleanup struct{ pgtestdb.TB }

func (ownCleanup) Cleanup(func()) {}

var (
	trashMu      sync.Mutex
	trashPending []string
	trashWake    = make(chan struct{}, 1)
	trashOnce    sync.Once
)

// discard marks a finished test's database as trash and queues its drop.
func discard(t testing.TB, base pgtestdb.Config, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, base.URL())
	if err != nil {
		t.Errorf("testdb: connect to mark %s as trash: %v", name, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS '"+trashMark+"'"); err != nil {
		t.Errorf("testdb: mark %s as trash: %v", name, err)
		return
	}
	trashOnce.Do(func() { go dropTrash(base) })
	trashMu.Lock()
	trashPending = append(trashPending, name)
	trashMu.Unlock()
	select {
	case trashWake <- struct{}{}:
	default:
	}
}

// dropTrash drops this binary's finished databases as they come, and
// first every database an earlier binary marked and left behind.
func dropTrash(base pgtestdb.Config) {
	ctx := context.Background()
	if c, err := pgx.Connect(ctx, base.URL()); err == nil {
		rows, _ := c.Query(ctx, `SELECT d.datname FROM pg_catalog.pg_database d
			JOIN pg_catalog.pg_shdescription s ON s.objoid = d.oid AND s.classoid = 'pg_catalog.pg_database'::regclass
			WHERE s.description = $1`, trashMark)
		left, err := pgx.CollectRows(rows, pgx.RowTo[string])
		c.Close(ctx)
		if err == nil {
			trashMu.Lock()
			trashPending = append(trashPending, left...)
			trashMu.Unlock()
		}
	}
	for {
		trashMu.Lock()
		batch := trashPending
		trashPending = nil
		trashMu.Unlock()
		if len(batch) == 0 {
			<-trashWake
			continue
		}
		var wg sync.WaitGroup
		slots := make(chan struct{}, 4) // a few connections of the shared server's hundred
		for _, name := range batch {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				c, err := pgx.Connect(ctx, base.URL())
				if err != nil {
					return // still marked: a later sweep drops it
				}
				defer c.Close(ctx)
				// Binaries that start together sweep the same leftovers:
				// one drops each (the lock lasts as long as this
				// connection), the others would only queue behind it for
				// the same checkpoint.
				var mine bool
				if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))", trashMark, name).Scan(&mine); err != nil || !mine {
					return
				}
				_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			})
		}
		wg.Wait()
	}
}
