package points

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

func awardTx(ctx context.Context, tx pgx.Tx, tenantID int64, a Award, now *time.Time) (bool, error) {
	applied, err := queries.New(tx).PointsAward(ctx, queries.PointsAwardParams{
		TenantID: tenantID, Consumer: Consumer, MessageID: a.MessageID, Customer: a.Customer,
		Points: a.Points, Reason: a.Reason, Now: now,
	})
	if err != nil {
		return false, fmt.Errorf("award message %q: %w", a.MessageID, err)
	}
	return applied == 1, nil // 0: already processed, the repeat wrote nothing
}

// claimManyTx claims awards' message ids (validated) and writes their
// ledger rows in tx; it returns the message ids applied now.
func claimManyTx(ctx context.Context, tx pgx.Tx, tenantID int64, awards []Award, now *time.Time) (map[string]bool, error) {
	p := queries.PointsClaimManyParams{TenantID: tenantID, Consumer: Consumer, Now: now}
	for _, a := range awards {
		p.MessageIds = append(p.MessageIds, a.MessageID)
		p.Customers = append(p.Customers, a.Customer)
		p.Points = append(p.Points, a.Points)
		p.Reasons = append(p.Reasons, a.Reason)
	}
	ids, err := queries.New(tx).PointsClaimMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("award %d messages: %w", len(awards), err)
	}
	applied := make(map[string]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	return applied, nil
}

// addBalances adds each award's points to its customer's balance.
func addBalances(ctx context.Context, q database.Querier, tenantID int64, awards []Award, now *time.Time) error {
	p := queries.PointsBalanceAddManyParams{TenantID: tenantID, Now: now}
	for _, a := range awards {
		p.Customers = append(p.Customers, a.Customer)
		p.Points = append(p.Points, a.Points)
	}
	if err := queries.New(q).PointsBalanceAddMany(ctx, p); err != nil {
		return fmt.Errorf("add %d awards to balances: %w", len(awards), err)
	}
	return nil
}

// GetBalance returns a customer's balance, or ErrNotFound.
func GetBalance(ctx context.Context, tx pgx.Tx, tenantID int64, customer string) (Balance, error) {
	r, err := queries.New(tx).PointsBalanceGet(ctx, queries.PointsBalanceGetParams{TenantID: tenantID, Customer: customer})
	if errors.Is(err, pgx.ErrNoRows) {
		return Balance{}, ErrNotFound
	}
	if err != nil {
		return Balance{}, fmt.Errorf("get balance of %q: %w", customer, err)
	}
	return Balance{TenantID: r.TenantID, Customer: r.Customer, Balance: r.Balance, UpdatedAt: r.UpdatedAt}, nil
}

// ListLedger returns a customer's ledger, oldest first.
func ListLedger(ctx context.Context, tx pgx.Tx, tenantID int64, customer string) ([]Entry, error) {
	rows, err := queries.New(tx).PointsLedgerListByCustomer(ctx, queries.PointsLedgerListByCustomerParams{TenantID: tenantID, Customer: customer})
	if err != nil {
		return nil, fmt.Errorf("list ledger of %q: %w", customer, err)
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = Entry{ID: r.ID, Customer: r.Customer, Points: r.Points, Reason: r.Reason, MessageID: r.MessageID, CreatedAt: r.CreatedAt}
	}
	return out, nil
}
