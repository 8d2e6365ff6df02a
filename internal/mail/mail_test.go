package mail_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/testdb"
)

// Sunday 8 February 2026, 07:00 in Jakarta.
var now = time.Date(2026, 2, 8, 0, 0, 0, 0, time.UTC)

type fixture struct {
	db     *testdb.DB
	tenant int64
	other  int64
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	var f = &fixture{db: db}
	err := db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('toko-budi', 'Toko Budi') RETURNING id`).Scan(&f.tenant)
	if err == nil {
		err = db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('other', 'Other') RETURNING id`).Scan(&f.other)
	}
	if err != nil {
		t.Fatalf("tenants: %v", err)
	}
	seed := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO users (email, name, password_hash, active) VALUES
			('budi@example.com', 'Budi', 'x', true), ('ani@example.com', 'Ani', 'x', true),
			('old@example.com', 'Old', 'x', false), ('staff@example.com', 'Sri', 'x', true),
			('elsewhere@example.com', 'E', 'x', true)`, nil},
		{`INSERT INTO memberships (tenant_id, user_id, role)
			SELECT $1, id, CASE email WHEN 'budi@example.com' THEN 'owner' WHEN 'ani@example.com' THEN 'admin'
				WHEN 'old@example.com' THEN 'owner' ELSE 'member' END
			FROM users WHERE email <> 'elsewhere@example.com'`, []any{f.tenant}},
		{`INSERT INTO memberships (tenant_id, user_id, role) SELECT $1, id, 'owner' FROM users WHERE email = 'elsewhere@example.com'`, []any{f.other}},
		{`INSERT INTO projects (tenant_id, name, created_at) VALUES
			($1, 'Landing Page Lebaran', $3::timestamptz - interval '30 days'),
			($1, 'Katalog', $3::timestamptz - interval '10 days'),
			($1, 'Promo Ramadan', $3::timestamptz - interval '2 days'),
			($2, 'Not mine', $3::timestamptz - interval '1 day')`, []any{f.tenant, f.other, now}},
		{`INSERT INTO plans (code, name, price_idr, max_projects) VALUES ('pro', 'Pro', 99000, 20)`, nil},
		{`INSERT INTO subscriptions (tenant_id, plan_code, current_period_start, current_period_end)
			VALUES ($1, 'pro', '2026-02-01 02:00+00', '2026-03-03 02:00+00')`, []any{f.tenant}},
	}
	for _, st := range seed {
		if _, err = db.Admin.Exec(ctx, st.sql, st.args...); err != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	return f
}

func reportJob(id, tenantID int64, p any) *job.Job {
	raw, _ := json.Marshal(p)
	return &job.Job{ID: id, TenantID: tenantID, Kind: mail.WeeklyReportKind, Payload: raw, Attempt: 1, MaxAttempts: 3}
}

func (f *fixture) stored(t *testing.T, tenantID int64) []mail.Stored {
	t.Helper()
	var out []mail.Stored
	err := database.InTenantTx(context.Background(), f.db.App, tenantID, func(tx pgx.Tx) error {
		var err error
		out, err = mail.ListStored(context.Background(), tx, tenantID, 50)
		return err
	})
	if err != nil {
		t.Fatalf("list stored mail: %v", err)
	}
	return out
}

func TestWeeklyReportLandsInDevSink(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	h := &mail.WeeklyReportHandler{App: f.db.App, Mailer: mail.NewSink(f.db.App), Clock: clock.NewFrozen(now)}

	j := reportJob(41, f.tenant, map[string]any{"tenant_id": f.tenant})
	if err := h.Handle(ctx, j); err != nil {
		t.Fatalf("handle: %v", err)
	}
	msgs := f.stored(t, f.tenant)
	if len(msgs) != 1 {
		t.Fatalf("%d stored messages, want 1", len(msgs))
	}
	m := msgs[0]
	if want := []string{"ani@example.com", "budi@example.com"}; !slices.Equal(m.To, want) {
		t.Errorf("to %v, want the active owner and admin %v", m.To, want)
	}
	if !m.CreatedAt.Equal(now) || m.From != mail.DefaultFrom || m.MessageID != fmt.Sprintf("weekly-report.%d.41@jejak", f.tenant) {
		t.Errorf("stored %+v", m)
	}
	if want := "Laporan mingguan Toko Budi: 1 Feb 2026 – 8 Feb 2026 / Weekly report for Toko Budi: 1 Feb 2026 – 8 Feb 2026"; m.Subject != want {
		t.Errorf("subject %q, want %q", m.Subject, want)
	}
	for _, want := range []string{"Projects: 3 (1 new this week)", "Plan: Pro (active, period ends 3 Mar 2026)",
		"Proyek: 3 (1 baru minggu ini)", "Paket: Pro (aktif, periode berakhir 3 Mar 2026)"} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, m.Body)
		}
	}
	var tenantOfRow int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT tenant_id FROM mail_messages`).Scan(&tenantOfRow); err != nil || tenantOfRow != f.tenant {
		t.Fatalf("row tenant %d (%v), want %d", tenantOfRow, err, f.tenant)
	}

	// Redelivery of the same job stores the message once.
	if err := h.Handle(ctx, j); err != nil {
		t.Fatal(err)
	}
	if n := len(f.stored(t, f.tenant)); n != 1 {
		t.Fatalf("after redelivery %d messages, want 1", n)
	}
	// The other tenant sees none of it.
	if n := len(f.stored(t, f.other)); n != 0 {
		t.Fatalf("other tenant sees %d messages", n)
	}

	// Explicit recipients replace the owners; the other tenant's report
	// counts only its own project.
	if err := h.Handle(ctx, reportJob(42, f.other, map[string]any{"tenant_id": f.other, "to": []string{"ops@example.com"}})); err != nil {
		t.Fatal(err)
	}
	o := f.stored(t, f.other)
	if len(o) != 1 || !slices.Equal(o[0].To, []string{"ops@example.com"}) || !strings.Contains(o[0].Body, "Projects: 1 (1 new this week)") || !strings.Contains(o[0].Body, "Plan: none") {
		t.Fatalf("other tenant's report: %+v", o)
	}
}

type failingMailer struct{ err error }

func (m failingMailer) Send(context.Context, mail.Message) error { return m.err }

func TestWeeklyReportClassifiesFailures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	good := map[string]any{"tenant_id": f.tenant}
	handler := func(m mail.Mailer) *mail.WeeklyReportHandler {
		return &mail.WeeklyReportHandler{App: f.db.App, Mailer: m, Clock: clock.NewFrozen(now)}
	}
	sink := mail.NewSink(f.db.App)
	// A tenant with nobody to mail.
	var lonely int64
	if err := f.db.Admin.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ('lonely', 'Lonely') RETURNING id`).Scan(&lonely); err != nil {
		t.Fatal(err)
	}
	closed, err := mail.NewSMTP("smtp://" + closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		mailer mail.Mailer
		job    *job.Job
		class  job.Class
	}{
		{"smtp down (injected)", failingMailer{errors.New("dial tcp: connection refused")}, reportJob(1, f.tenant, good), job.ClassTransient},
		{"smtp down (real client)", closed, reportJob(1, f.tenant, good), job.ClassTransient},
		{"smtp rejects", failingMailer{fmt.Errorf("%w: 550 no such user", mail.ErrRejected)}, reportJob(1, f.tenant, good), job.ClassPermanent},
		{"not json", sink, &job.Job{ID: 1, TenantID: f.tenant, Payload: json.RawMessage(`{`)}, job.ClassPermanent},
		{"unknown field", sink, reportJob(1, f.tenant, map[string]any{"tenant_id": f.tenant, "cc": "x@example.com"}), job.ClassPermanent},
		{"bad recipient", sink, reportJob(1, f.tenant, map[string]any{"tenant_id": f.tenant, "to": []string{"x@example.com\r\nBcc: y@example.com"}}), job.ClassPermanent},
		{"named recipient", sink, reportJob(1, f.tenant, map[string]any{"tenant_id": f.tenant, "to": []string{"Budi <budi@example.com>"}}), job.ClassPermanent},
		{"no recipients", sink, reportJob(1, lonely, map[string]any{"tenant_id": lonely}), job.ClassPermanent},
		{"other tenant", sink, reportJob(1, f.tenant, map[string]any{"tenant_id": f.other}), job.ClassPolicy},
	}
	for _, c := range cases {
		err := handler(c.mailer).Handle(ctx, c.job)
		if err == nil {
			t.Errorf("%s: succeeded", c.name)
			continue
		}
		if got := job.ClassOf(err); got != c.class {
			t.Errorf("%s: class %s, want %s (%v)", c.name, got, c.class, err)
		}
	}
	var n int
	if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM mail_messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed reports stored %d messages (%v)", n, err)
	}
}

func TestSinkRespectsTenants(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	sink := mail.NewSink(f.db.App)
	m := mail.Message{TenantID: f.tenant, ID: "m1@test", From: "a@example.com", To: []string{"b@example.com"}, Subject: "hi", Text: "body"}
	if err := sink.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The same Message-ID in another tenant is another message.
	m.TenantID = f.other
	if err := sink.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	if a, b := len(f.stored(t, f.tenant)), len(f.stored(t, f.other)); a != 1 || b != 1 {
		t.Fatalf("stored %d and %d, want 1 and 1", a, b)
	}
	// A tenant transaction asking for the other tenant's mail sees nothing.
	err := database.InTenantTx(ctx, f.db.App, f.other, func(tx pgx.Tx) error {
		got, err := mail.ListStored(ctx, tx, f.tenant, 10)
		if err == nil && len(got) != 0 {
			t.Errorf("tenant %d read %d messages of tenant %d", f.other, len(got), f.tenant)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The application role cannot rewrite what the sink kept.
	err = database.InTenantTx(ctx, f.db.App, f.tenant, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mail_messages SET body = 'forged'`)
		return err
	})
	if err == nil {
		t.Fatal("jejak_app updated a stored message")
	}
}

func TestMessageValidate(t *testing.T) {
	t.Parallel()
	ok := mail.Message{TenantID: 1, ID: "x@jejak", From: "Jejak <no-reply@jejak.local>", To: []string{"a@example.com"}, Subject: "s", Text: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid message: %v", err)
	}
	cases := map[string]func(m *mail.Message){
		"no tenant":         func(m *mail.Message) { m.TenantID = 0 },
		"no id":             func(m *mail.Message) { m.ID = "" },
		"id with newline":   func(m *mail.Message) { m.ID = "a\r\nBcc: x@y" },
		"subject injection": func(m *mail.Message) { m.Subject = "hi\r\nBcc: evil@example.com" },
		"bad from":          func(m *mail.Message) { m.From = "nobody" },
		"no recipients":     func(m *mail.Message) { m.To = nil },
		"bad recipient":     func(m *mail.Message) { m.To = []string{"not an address"} },
	}
	for name, mutate := range cases {
		m := ok
		m.To = slices.Clone(ok.To)
		mutate(&m)
		if err := m.Validate(); !errors.Is(err, mail.ErrInvalidMessage) {
			t.Errorf("%s: %v, want ErrInvalidMessage", name, err)
		}
	}
}

func TestNewSMTPParsesURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"http://mail.example.com", "smtp://", "::"} {
		if _, err := mail.NewSMTP(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"smtp://mail.example.com", "smtp://u:p@mail.example.com:587", "smtps://mail.example.com"} {
		if _, err := mail.NewSMTP(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == mail.EnvSMTPURL {
				return v
			}
			return ""
		}
	}
	if m, err := mail.FromEnv(env(""), nil); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*mail.Sink); !ok {
		t.Errorf("default mailer is %T, want the dev sink", m)
	}
	if m, err := mail.FromEnv(env("smtp://localhost:2525"), nil); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*mail.SMTP); !ok {
		t.Errorf("configured mailer is %T, want SMTP", m)
	}
}

func TestSMTPDelivers(t *testing.T) {
	t.Parallel()
	srv := startFakeSMTP(t, "")
	s, err := mail.NewSMTP("smtp://" + srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	date := now
	m := mail.Message{TenantID: 1, ID: "weekly-report.1.9@jejak", From: "Jejak <no-reply@jejak.local>",
		To: []string{"budi@example.com", "ani@example.com"}, Subject: "Laporan mingguan – Toko Budi", Text: "Halo,\nProjects: 3\n", Date: &date}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("send: %v", err)
	}
	got := <-srv.got
	if got.from != "no-reply@jejak.local" || !slices.Equal(got.rcpt, m.To) {
		t.Errorf("envelope from %q to %v", got.from, got.rcpt)
	}
	for _, want := range []string{
		"Message-ID: <weekly-report.1.9@jejak>\r\n",
		"Subject: =?utf-8?q?Laporan_mingguan_=E2=80=93_Toko_Budi?=\r\n",
		"To: budi@example.com, ani@example.com\r\n",
		"Content-Type: text/plain; charset=utf-8\r\n",
		"\r\n\r\nHalo,\r\nProjects: 3\r\n",
	} {
		if !strings.Contains(got.data, want) {
			t.Errorf("message lacks %q:\n%s", want, got.data)
		}
	}
}

func TestSMTPRejectionIsPermanent(t *testing.T) {
	t.Parallel()
	srv := startFakeSMTP(t, "550 5.1.1 no such user")
	s, err := mail.NewSMTP("smtp://" + srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), mail.Message{TenantID: 1, ID: "x@jejak", From: "a@example.com", To: []string{"ghost@example.com"}, Subject: "s", Text: "t"})
	if !errors.Is(err, mail.ErrRejected) {
		t.Fatalf("550 reply: %v, want ErrRejected", err)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type received struct {
	from string
	rcpt []string
	data string
}

type fakeSMTP struct {
	addr string
	got  chan received
}

// startFakeSMTP serves one SMTP session on loopback; rcptReply, when set,
// is the reply to every RCPT TO.
func startFakeSMTP(t *testing.T, rcptReply string) *fakeSMTP {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f := &fakeSMTP{addr: l.Addr().String(), got: make(chan received, 1)}
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		c := textproto.NewConn(conn)
		var r received
		reply := func(s string) { _ = c.PrintfLine("%s", s) }
		reply("220 fake ESMTP")
		for {
			line, err := c.ReadLine()
			if err != nil {
				return
			}
			cmd := strings.ToUpper(line)
			switch {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				reply("250-fake")
				reply("250 8BITMIME")
			case strings.HasPrefix(cmd, "MAIL FROM:"):
				r.from = strings.Trim(line[len("MAIL FROM:"):], "<> ")
				if i := strings.Index(r.from, ">"); i >= 0 {
					r.from = r.from[:i]
				}
				reply("250 ok")
			case strings.HasPrefix(cmd, "RCPT TO:"):
				if rcptReply != "" {
					reply(rcptReply)
					continue
				}
				r.rcpt = append(r.rcpt, strings.Trim(line[len("RCPT TO:"):], "<> "))
				reply("250 ok")
			case cmd == "DATA":
				reply("354 go ahead")
				var b strings.Builder
				br := bufio.NewReader(c.DotReader())
				for {
					l, err := br.ReadString('\n')
					b.WriteString(strings.TrimSuffix(l, "\n") + "\r\n")
					if err != nil {
						break
					}
				}
				r.data = strings.TrimSuffix(b.String(), "\r\n")
				reply("250 queued")
			case cmd == "QUIT":
				reply("221 bye")
				f.got <- r
				return
			default:
				reply("502 unknown")
			}
		}
	}()
	return f
}
