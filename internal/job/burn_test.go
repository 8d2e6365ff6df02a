package job_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestBurnDownThroughput is a quick local throughput probe (the real
// comparison with River is `make bench`). Run with
// JEJAK_BURN=200000 go test -run BurnDown -v ./internal/job/
func TestBurnDownThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JEJAK_BURN"))
	if n <= 0 {
		t.Skip("set JEJAK_BURN=<jobs> to measure burn-down throughput")
	}
	workers, _ := strconv.Atoi(os.Getenv("JEJAK_BURN_WORKERS"))
	if workers <= 0 {
		workers = 100
	}
	tenants, _ := strconv.Atoi(os.Getenv("JEJAK_BURN_TENANTS"))
	if tenants <= 0 {
		tenants = 1
	}
	db := testdb.New(t)
	pool, err := database.OpenSystem(context.Background(), db.URL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the engine stops (cleanups run last-in first-out)
	ten := newTenants(t, db, tenants)
	e := newEngine(t, db, job.Config{Pool: pool, Workers: workers})
	var done atomic.Int64
	e.Register("noop", func(ctx context.Context, j *job.Job) error { done.Add(1); return nil }, job.KindOptions{})
	for i, id := range ten {
		per := n / tenants
		if i == 0 {
			per += n % tenants
		}
		for left := per; left > 0; left -= 5000 {
			enqueueBulk(t, db, e, id, "noop", min(left, 5000))
		}
	}
	if _, err := db.Admin.Exec(context.Background(), "VACUUM ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	startEngine(t, e)
	testwait.Within(t, 10*time.Minute, "handlers", func() bool { return done.Load() >= int64(n) })
	testwait.Within(t, 10*time.Minute, "burn-down", func() bool {
		var left int
		_ = db.Admin.QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE state <> 'succeeded'").Scan(&left)
		return left == 0
	})
	el := time.Since(start)
	st := e.Stats()
	t.Logf("claims=%d claimed=%d avg_claim=%s flushes=%d completed=%d avg_flush=%s", st.Claims, st.Claimed,
		st.ClaimTime/time.Duration(max(st.Claims, 1)), st.Flushes, st.Completed, st.FlushTime/time.Duration(max(st.Flushes, 1)))
	t.Logf("BENCH burn-down system=jejak jobs=%d workers=%d tenants=%d seconds=%.2f jobs_per_sec=%.0f",
		n, workers, tenants, el.Seconds(), float64(n)/el.Seconds())
}
