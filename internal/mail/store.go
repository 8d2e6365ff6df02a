package mail

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

func insertMessage(ctx context.Context, tx pgx.Tx, m Message) error {
	_, err := queries.New(tx).MailMessageInsert(ctx, queries.MailMessageInsertParams{
		TenantID: m.TenantID, MessageID: m.ID, FromAddr: m.From, ToAddrs: m.To,
		Subject: m.Subject, Body: m.Text, Now: m.Date,
	})
	return err
}

// ListStored returns up to limit messages the dev sink kept for tenantID,
// newest first.
func ListStored(ctx context.Context, tx pgx.Tx, tenantID int64, limit int32) ([]Stored, error) {
	rows, err := queries.New(tx).MailMessageListByTenant(ctx, queries.MailMessageListByTenantParams{TenantID: tenantID, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list stored mail of tenant %d: %w", tenantID, err)
	}
	out := make([]Stored, len(rows))
	for i, r := range rows {
		out[i] = Stored{ID: r.ID, MessageID: r.MessageID, From: r.FromAddr, To: r.ToAddrs, Subject: r.Subject, Body: r.Body, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// weeklySummary is what the weekly report says about a tenant.
type weeklySummary struct {
	TenantName   string
	TimeZone     string
	WeekStart    time.Time
	WeekEnd      time.Time
	ProjectCount int64
	ProjectsNew  int64
	PlanName     string // "" without a subscription
	PlanStatus   string
	PeriodEnd    *time.Time
	Recipients   []string
}

func loadWeeklySummary(ctx context.Context, tx pgx.Tx, tenantID int64, now *time.Time) (weeklySummary, error) {
	q := queries.New(tx)
	r, err := q.MailWeeklySummary(ctx, queries.MailWeeklySummaryParams{TenantID: tenantID, Now: now})
	if err != nil {
		return weeklySummary{}, fmt.Errorf("load weekly figures: %w", err)
	}
	s := weeklySummary{
		TenantName: r.TenantName, TimeZone: r.TimeZone, WeekStart: r.WeekStart, WeekEnd: r.WeekEnd,
		ProjectCount: r.ProjectCount, ProjectsNew: r.ProjectsNew, PeriodEnd: r.CurrentPeriodEnd,
	}
	if r.PlanName != nil {
		s.PlanName = *r.PlanName
	}
	if r.SubscriptionStatus != nil {
		s.PlanStatus = *r.SubscriptionStatus
	}
	if s.Recipients, err = q.MailReportRecipients(ctx, tenantID); err != nil {
		return weeklySummary{}, fmt.Errorf("load report recipients: %w", err)
	}
	return s, nil
}
