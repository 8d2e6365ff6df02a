package testdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL 15 forces an immediate checkpoint on every DROP DATABASE, so
// dropping at the end of each passing test held a parallel test slot for a
// flush of every dirty buffer on the server: about a second per test under
// load, longer than cloning. A passing test's database is instead marked
// as trash (a comment on the database: one catalog row, no waiting) and
// dropped by one goroutine per test binary, two at a time so that
// concurrent drops share a checkpoint. A binary that exits first leaves its
// marked databases to the next binary's sweep; the mark is what makes a
// database safe to drop from another process, since only a finished test's
// database carries it. A failing test's database is never marked: it is
// kept for inspection.

const trashMark = "jejak-test-trash"

var (
	trashMu      sync.Mutex
	trashPending []string
	trashWake    = make(chan struct{}, 1)
	trashOnce    sync.Once
)

// discard marks a finished test's database as trash and queues its drop.
func (s *srv) discard(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "COMMENT ON DATABASE "+ident(name)+" IS '"+trashMark+"'"); err != nil {
		t.Errorf("testdb: mark %s as trash: %v", name, err)
		return
	}
	trashOnce.Do(func() { go s.dropTrash() })
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
func (s *srv) dropTrash() {
	ctx := context.Background()
	rows, _ := s.pool.Query(ctx, `SELECT d.datname FROM pg_catalog.pg_database d
		JOIN pg_catalog.pg_shdescription s ON s.objoid = d.oid AND s.classoid = 'pg_catalog.pg_database'::regclass
		WHERE s.description = $1`, trashMark)
	if left, err := pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
		trashMu.Lock()
		trashPending = append(trashPending, left...)
		trashMu.Unlock()
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
		slots := make(chan struct{}, 2) // of the binary's six sessions: clones go beside them
		for _, name := range batch {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				s.drop(ctx, name)
			})
		}
		wg.Wait()
	}
}

// drop drops one marked database. Binaries that start together sweep the
// same leftovers: one drops each, the others would only queue behind it
// for the same checkpoint. A database not dropped stays marked, for a
// later sweep.
func (s *srv) drop(ctx context.Context, name string) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer c.Release()
	var mine bool
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))", trashMark, name).Scan(&mine); err != nil || !mine {
		return
	}
	_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
	_, _ = c.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1), hashtext($2))", trashMark, name)
}
