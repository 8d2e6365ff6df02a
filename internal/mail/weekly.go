package mail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds/payload"
)

// WeeklyReportKind is the job kind that mails a tenant its weekly summary.
const WeeklyReportKind = "email.weekly-report"

// DefaultFrom is the sender when none is configured.
const DefaultFrom = "Jejak <no-reply@jejak.local>"

// ErrNoRecipients: the report has nobody to go to (no owner or admin, and
// none named in the payload).
var ErrNoRecipients = errors.New("mail: weekly report has no recipients")

// WeeklyReportHandler runs email.weekly-report jobs.
type WeeklyReportHandler struct {
	App    database.Beginner // jejak_app pool: figures are read under the job's tenant
	Mailer Mailer
	From   string      // "" = DefaultFrom
	Clock  clock.Clock // nil = database clock
}

// weeklyPayload is email.weekly-report's JSON payload. Without "to" the
// report goes to the tenant's active owners and admins.
type weeklyPayload struct {
	TenantID int64    `json:"tenant_id"`
	To       []string `json:"to"`
}

// Handle is the job.Handler for email.weekly-report. The figures are read
// in a tenant-scoped transaction; the mail is sent after it ends, so a
// slow SMTP server holds no database connection. Sending fails as
// transient (retried) unless the message itself is refused.
func (h *WeeklyReportHandler) Handle(ctx context.Context, j *job.Job) error {
	var p weeklyPayload
	if err := payload.Decode(j, &p); err != nil {
		return err
	}
	for _, to := range p.To {
		if err := ValidateAddress(to); err != nil {
			return job.Permanent(fmt.Errorf("email.weekly-report job %d: %w", j.ID, err))
		}
	}
	var now *time.Time
	if h.Clock != nil {
		now = h.Clock.Now()
	}
	var s weeklySummary
	err := database.InTenantTx(ctx, h.App, j.TenantID, func(tx pgx.Tx) error {
		var err error
		s, err = loadWeeklySummary(ctx, tx, j.TenantID, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("email.weekly-report job %d: %w", j.ID, err)
	}
	to := p.To
	if len(to) == 0 {
		to = s.Recipients
	}
	if len(to) == 0 {
		return job.Permanent(fmt.Errorf("email.weekly-report job %d: %w", j.ID, ErrNoRecipients))
	}
	from := h.From
	if from == "" {
		from = DefaultFrom
	}
	date := s.WeekEnd
	m := Message{
		TenantID: j.TenantID,
		ID:       fmt.Sprintf("weekly-report.%d.%d@jejak", j.TenantID, j.ID),
		From:     from,
		To:       to,
		Date:     &date,
	}
	m.Subject, m.Text = renderWeekly(s)
	if err := h.Mailer.Send(ctx, m); err != nil {
		err = fmt.Errorf("email.weekly-report job %d: %w", j.ID, err)
		if errors.Is(err, ErrInvalidMessage) || errors.Is(err, ErrRejected) {
			return job.Permanent(err)
		}
		return err
	}
	// Sent: the tenant's trail says so (a retry after this point sends the
	// same Message-ID again, which receivers and the sink deduplicate).
	return database.InTenantTx(ctx, h.App, j.TenantID, func(tx pgx.Tx) error {
		return audit.NewRecorder(h.Clock).RecordWork(ctx, tx, audit.WorkDone{TenantID: j.TenantID, Action: "report.sent",
			Entity: "report", EntityID: m.ID, TraceID: j.TraceID, JobID: j.ID,
			Detail: map[string]any{"recipients": len(to), "week_start": s.WeekStart.Format(time.RFC3339)}})
	})
}

func renderWeekly(s weeklySummary) (subject, text string) {
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	day := func(t time.Time) string { return t.In(loc).Format("2 Jan 2006") }
	subject = fmt.Sprintf("Weekly report for %s: %s – %s", s.TenantName, day(s.WeekStart), day(s.WeekEnd))
	var b strings.Builder
	fmt.Fprintf(&b, "Hello,\n\nThis is the weekly summary of %s for %s – %s.\n\n", s.TenantName, day(s.WeekStart), day(s.WeekEnd))
	fmt.Fprintf(&b, "Projects: %d (%d new this week)\n", s.ProjectCount, s.ProjectsNew)
	if s.PlanName == "" {
		b.WriteString("Plan: none\n")
	} else {
		fmt.Fprintf(&b, "Plan: %s (%s", s.PlanName, s.PlanStatus)
		if s.PeriodEnd != nil {
			fmt.Fprintf(&b, ", period ends %s", day(*s.PeriodEnd))
		}
		b.WriteString(")\n")
	}
	b.WriteString("\n— Jejak\n")
	return subject, b.String()
}
