package points

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

func awardTx(ctx context.Context, tx pgx.Tx, tenantID int64, a Award, now *time.Time) (bool, error) {
	q := queries.New(tx)
	n, err := q.ProcessedMessageClaim(ctx, queries.ProcessedMessageClaimParams{
		TenantID: tenantID, Consumer: Consumer, MessageID: a.MessageID, Now: now,
	})
	if err != nil {
		return false, fmt.Errorf("claim message %q: %w", a.MessageID, err)
	}
	if n == 0 {
		return false, nil // already processed: the repeat is a no-op
	}
	if _, err := q.PointsLedgerInsert(ctx, queries.PointsLedgerInsertParams{
		TenantID: tenantID, Customer: a.Customer, Points: a.Points, Reason: a.Reason, MessageID: a.MessageID, Now: now,
	}); err != nil {
		return false, fmt.Errorf("insert ledger row for message %q: %w", a.MessageID, err)
	}
	if _, err := q.PointsBalanceAdd(ctx, queries.PointsBalanceAddParams{
		TenantID: tenantID, Customer: a.Customer, Points: a.Points, Now: now,
	}); err != nil {
		return false, fmt.Errorf("add to balance of %q: %w", a.Customer, err)
	}
	return true, nil
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
