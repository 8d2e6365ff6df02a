package mail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds/payload"
	"github.com/jejakhq/jejak/internal/tz"
)

// WeeklyReportKind is the job kind that mails a tenant its weekly summary.
const WeeklyReportKind = "email.weekly-report"

// DefaultFrom is the sender when none is configured.
const DefaultFrom = "Jejak <no-reply@jejak.local>"

// ErrNoRecipients: the report has nobody to go to (no owner or admin, and
// none named in the payload).
var ErrNoRecipients = apperr.Conflict("mail: weekly report has no recipients")

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

// renderWeekly writes the report in Bahasa Indonesia and then in English:
// recipients are addresses, not accounts with a chosen language, so the
// mail carries both (Indonesian first, as the tenants are Indonesian).
func renderWeekly(s weeklySummary) (subject, text string) {
	loc, err := tz.Load(s.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	var subjects []string
	var b strings.Builder
	for i, lang := range []string{i18n.ID, i18n.EN} {
		day := func(t time.Time) string { return i18n.Date(lang, t.In(loc)) }
		subjects = append(subjects, i18n.In(lang, "mail.weekly.subject", s.TenantName, day(s.WeekStart), day(s.WeekEnd)))
		if i > 0 {
			b.WriteString("\n--------\n\n")
		}
		b.WriteString(i18n.In(lang, "mail.weekly.hello", s.TenantName, day(s.WeekStart), day(s.WeekEnd)))
		b.WriteString(i18n.In(lang, "mail.weekly.projects", s.ProjectCount, s.ProjectsNew))
		if s.PlanName == "" {
			b.WriteString(i18n.In(lang, "mail.weekly.no_plan"))
		} else {
			b.WriteString(i18n.In(lang, "mail.weekly.plan", s.PlanName, i18n.In(lang, "status."+s.PlanStatus)))
			if s.PeriodEnd != nil {
				b.WriteString(i18n.In(lang, "mail.weekly.ends", day(*s.PeriodEnd)))
			}
			b.WriteString(")\n")
		}
		b.WriteString(i18n.In(lang, "mail.weekly.sign"))
	}
	return strings.Join(subjects, " / "), b.String()
}
