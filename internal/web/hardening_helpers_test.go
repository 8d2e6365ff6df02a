package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// eventually polls a COUNT query until it returns want, failing after a
// deadline (for work done just after an answer was sent).
func (f *fixture) eventually(want int, sql string, args ...any) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := f.count(sql, args...)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%q = %d, want %d", sql, n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer collects JSON log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// errors returns the ERROR lines logged so far.
func (l *logBuffer) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return out
}

// newFixtureWith is newFixture whose dependencies the test may adjust
// before the handler is built; it returns them too, and the log.
func newFixtureWith(t *testing.T, adjust func(*web.Deps)) (*fixture, *web.Deps, *logBuffer) {
	t.Helper()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatalf("seed demo data: %v", err)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	engine, err := job.New(job.Config{Pool: db.System, Logger: log})
	if err != nil {
		t.Fatalf("job engine: %v", err)
	}
	deps := app.NewDeps(db.App, db.System, engine, clock.Database{}, log)
	if adjust != nil {
		adjust(&deps)
	}
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	return &fixture{t: t, db: db, srv: srv, jobs: engine}, &deps, logs
}
