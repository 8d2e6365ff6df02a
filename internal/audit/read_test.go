package audit_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/keyset"
)

// TestTimelineKeysetPagination: walking pages with a cursor returns every
// matching event exactly once, newest first, with and without filters.
func TestTimelineKeysetPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn, other := f.tenant(t, "melati"), f.tenant(t, "senja")
	u := f.user(t, "budi@melati.test", tn)
	start := *f.clk.Now()
	actions := []string{"project.create", "project.delete", "subscription.change"}
	type want struct {
		id     int64
		action string
		at     time.Time
	}
	var all []want
	for i := 0; i < 47; i++ {
		f.clk.Advance(time.Hour)
		e := audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: actions[i%3], Entity: "project", EntityID: fmt.Sprint(i % 5)}
		if i%4 == 0 {
			e.ActorKind, e.ActorID = audit.ActorUser, &u
		}
		r := f.record(t, e)
		all = append(all, want{r.ID, r.Action, r.OccurredAt})
		if i%10 == 0 {
			f.record(t, audit.Event{TenantID: other, ActorKind: audit.ActorSystem, Action: actions[0], Entity: "project", EntityID: "1"})
		}
	}
	cases := []struct {
		name   string
		filter audit.Filter
		match  func(i int, w want) bool
	}{
		{"all", audit.Filter{}, func(int, want) bool { return true }},
		{"action", audit.Filter{Action: "project.delete"}, func(_ int, w want) bool { return w.action == "project.delete" }},
		{"entity", audit.Filter{Entity: "project", EntityID: "3"}, func(i int, _ want) bool { return i%5 == 3 }},
		{"actor", audit.Filter{ActorKind: audit.ActorUser, ActorID: &u}, func(i int, _ want) bool { return i%4 == 0 }},
		{"date range", audit.Filter{From: ptr(start.Add(10 * time.Hour)), To: ptr(start.Add(30 * time.Hour))},
			func(_ int, w want) bool {
				return !w.at.Before(start.Add(10*time.Hour)) && w.at.Before(start.Add(30*time.Hour))
			}},
	}
	for _, c := range cases {
		var expect []int64
		for i := len(all) - 1; i >= 0; i-- {
			if c.match(i, all[i]) {
				expect = append(expect, all[i].id)
			}
		}
		var got []int64
		var cursor int64
		pages := 0
		for {
			var p audit.Page
			err := database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) (err error) {
				p, err = audit.Timeline(ctx, tx, tn, c.filter, cursor, 4)
				return err
			})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			pages++
			for _, e := range p.Rows {
				if e.TenantID != tn {
					t.Fatalf("%s: event of tenant %d in tenant %d's timeline", c.name, e.TenantID, tn)
				}
				got = append(got, e.ID)
			}
			if p.Next == 0 {
				break
			}
			// The cursor survives a round trip through a URL.
			if cursor, err = keyset.Cursor("before", keyset.Format(p.Next)); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(expect) {
			t.Errorf("%s: got %v, want %v", c.name, got, expect)
		}
		if wantPages := max(1, (len(expect)+3)/4); pages != wantPages {
			t.Errorf("%s: %d pages for %d events, want %d", c.name, pages, len(expect), wantPages)
		}
	}
}

// TestSearchAcrossTenants: staff find a trace's and a job's events in every
// tenant through the system pool; the app pool finds only its own.
func TestSearchAcrossTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	t1, t2 := f.tenant(t, "melati"), f.tenant(t, "senja")
	f.recordN(t, t1, 2)
	for _, tn := range []int64{t1, t2, t1} {
		f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "job.succeeded", Entity: "job", EntityID: "77",
			TraceID: "trace-abc", JobID: ptr(int64(77))})
	}
	for _, q := range []audit.SearchQuery{{TraceID: "trace-abc"}, {JobID: ptr(int64(77))}, {TraceID: "trace-abc", JobID: ptr(int64(77))}} {
		var ids []int64
		var cursor int64
		for {
			p, err := audit.Search(ctx, f.db.System, q, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Rows {
				ids = append(ids, e.ID)
			}
			if cursor = p.Next; cursor == 0 {
				break
			}
		}
		if len(ids) != 3 || ids[0] < ids[1] || ids[1] < ids[2] {
			t.Errorf("staff search %+v: ids %v, want 3 newest first", q, ids)
		}
	}
	q := audit.SearchQuery{TraceID: "trace-abc", TenantID: &t2}
	if p, err := audit.Search(ctx, f.db.System, q, 0, 10); err != nil || len(p.Rows) != 1 {
		t.Errorf("staff search within tenant 2: %d events, %v", len(p.Rows), err)
	}
	err := database.InTenantTx(ctx, f.db.App, t2, func(tx pgx.Tx) error {
		p, err := audit.Search(ctx, tx, audit.SearchQuery{TraceID: "trace-abc"}, 0, 10)
		if err != nil || len(p.Rows) != 1 || p.Rows[0].TenantID != t2 {
			t.Errorf("tenant 2 search: %+v, %v", p.Rows, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Search(ctx, f.db.System, audit.SearchQuery{}, 0, 10); err == nil {
		t.Error("search with no trace or job id was accepted")
	}
}

// TestExportEscapesFormulas: CSV cells that a spreadsheet would evaluate
// are neutralised; both exports stream every sealed event with its leaf
// hash.
func TestExportEscapesFormulas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	hostile := []string{"=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain"}
	for _, s := range hostile {
		f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "test.export", Entity: "e",
			EntityID: s, TraceID: s, Detail: json.RawMessage(fmt.Sprintf(`{"v": %q}`, s))})
	}
	f.seal(t) // exports hold the sealed, signed log
	var buf bytes.Buffer
	err := audit.ExportCSV(ctx, f.db.App, tn, audit.Filter{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("export is not CSV: %v", err)
	}
	// header, one row per event, and the trailer
	if len(recs) != len(hostile)+2 || strings.Join(recs[0], ",") != strings.Join(audit.CSVHeader, ",") ||
		recs[len(recs)-1][0] != "#trailer" || recs[len(recs)-1][1] != strconv.Itoa(len(hostile)) {
		t.Fatalf("export has %d lines, header %v", len(recs), recs[0])
	}
	for i, s := range hostile {
		row := recs[i+1]
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("row %d: cell %q starts with a formula character", i+1, cell)
			}
		}
		want := s
		if s != "plain" {
			want = "'" + s
		}
		if row[8] != want || row[10] != want {
			t.Errorf("row %d: entity_id %q trace_id %q, want %q", i+1, row[8], row[10], want)
		}
	}

	buf.Reset()
	err = audit.ExportJSONLines(ctx, f.db.App, tn, audit.Filter{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(hostile)+1 || !strings.HasPrefix(lines[len(lines)-1], `{"trailer":`) {
		t.Fatalf("JSON Lines export has %d lines, want %d and the trailer", len(lines), len(hostile))
	}
	lines = lines[:len(hostile)]
	for i, l := range lines {
		var v struct {
			Seq      int64  `json:"seq"`
			EntityID string `json:"entity_id"`
			LeafHash string `json:"leaf_hash"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Seq != int64(i+1) || v.EntityID != hostile[i] || len(v.LeafHash) != 44 {
			t.Errorf("line %d = %s (%v)", i, l, err)
		}
	}
}

// TestExportStreamsInBatches: an export larger than one batch arrives
// complete and in order, written progressively (several writes).
func TestExportStreamsInBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn}, 2500, audit.SeedOptions{BatchSize: 1000}); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	// The writer checks, at every write, that the export holds no pool
	// connection (so no transaction) while it writes to the client.
	w := &countingWriter{held: func() int32 { return f.db.App.Stat().AcquiredConns() }}
	err := audit.ExportJSONLines(ctx, f.db.App, tn, audit.Filter{}, w)
	if err != nil {
		t.Fatal(err)
	}
	if w.lines != 2501 || w.writes < 3 {
		t.Fatalf("export wrote %d lines in %d writes, want 2500 lines and the trailer in several writes", w.lines, w.writes)
	}
	if w.maxHeld != 0 {
		t.Fatalf("the export held %d pool connections while writing to its client", w.maxHeld)
	}
}

type countingWriter struct {
	lines, writes int
	held          func() int32
	maxHeld       int32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.held != nil {
		c.maxHeld = max(c.maxHeld, c.held())
	}
	c.writes++
	c.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// TestRecordJobEvent: lifecycle steps land as job.<stage> with worker,
// attempt and trace, and unknown stages are refused.
func TestRecordJobEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	staff := f.user(t, "support@jejak.test", 0)
	steps := []audit.JobEvent{
		{Stage: audit.JobQueued},
		{Stage: audit.JobClaimed, WorkerID: "worker-a-3", Attempt: 1},
		{Stage: audit.JobRejected, WorkerID: "worker-a-3", Attempt: 1, Reason: "expired", Detail: json.RawMessage(`{"approval_id": 456, "kind": "ignored"}`)},
		{Stage: audit.JobReplayed, ActorKind: audit.ActorStaff, ActorID: &staff, Reason: "customer asked"},
	}
	err := database.InTx(ctx, f.db.System, func(tx pgx.Tx) error {
		for _, s := range steps {
			s.TenantID, s.JobID, s.Kind, s.TraceID = tn, 987, "user.disable-access", "trace-8f2"
			if err := f.rec.RecordJobEvent(ctx, tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := audit.Search(ctx, f.db.System, audit.SearchQuery{JobID: ptr(int64(987))}, 0, 10)
	if err != nil || len(p.Rows) != 4 {
		t.Fatalf("job events: %d, %v", len(p.Rows), err)
	}
	rejected := p.Rows[1]
	var d map[string]any
	if err := json.Unmarshal(rejected.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if rejected.Action != "job.rejected" || rejected.Entity != "job" || rejected.EntityID != "987" || rejected.TraceID != "trace-8f2" ||
		d["worker_id"] != "worker-a-3" || d["attempt"] != 1.0 || d["reason"] != "expired" || d["kind"] != "user.disable-access" || d["approval_id"] != 456.0 {
		t.Errorf("rejected event = %s %s/%s trace %s detail %v", rejected.Action, rejected.Entity, rejected.EntityID, rejected.TraceID, d)
	}
	if r := p.Rows[0]; r.ActorKind != audit.ActorStaff || *r.ActorID != staff {
		t.Errorf("replay actor = %s %v", r.ActorKind, r.ActorID)
	}
	err = database.InTx(ctx, f.db.System, func(tx pgx.Tx) error {
		err := f.rec.RecordJobEvent(ctx, tx, audit.JobEvent{TenantID: tn, JobID: 1, Stage: "exploded"})
		return err
	})
	if err == nil {
		t.Error("unknown stage accepted")
	}
}
