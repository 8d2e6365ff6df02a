package demo

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/user"
)

// SensitiveDeps are what the sensitive-work demo needs.
type SensitiveDeps struct {
	System    *pgxpool.Pool
	Approvals *approval.Service
	Payments  *payment.Service
}

// LeaverEmail is a former employee of kopi-senja whose access the demo
// revokes through the two-person flow (not a sign-in account).
const LeaverEmail = "joko@senja.test"

// SeedSensitive stages the two-person and payment stories once: a pending
// request to disable Rina's access (waiting for a second staff member), an
// approved one disabling a former employee of Kopi Senja (the workers run
// it), and a double charge of Batik Nusantara that reconciliation refunds.
// It does nothing when approvals exist already (a second run of the demo).
func SeedSensitive(ctx context.Context, d SensitiveDeps) error {
	var n int
	if err := d.System.QueryRow(ctx, `SELECT count(*) FROM approvals`).Scan(&n); err != nil {
		return fmt.Errorf("demo approvals: %w", err)
	}
	if n > 0 {
		return nil
	}
	id := func(sql string, args ...any) (int64, error) {
		var v int64
		err := d.System.QueryRow(ctx, sql, args...).Scan(&v)
		return v, err
	}
	hash, err := user.HashPassword(Password + "-leaver")
	if err != nil {
		return err
	}
	joko, err := id(`INSERT INTO users (email, name, password_hash) VALUES ($1, 'Joko Susilo', $2)
		ON CONFLICT (email) DO UPDATE SET name = EXCLUDED.name RETURNING id`, LeaverEmail, hash)
	if err != nil {
		return fmt.Errorf("demo leaver: %w", err)
	}
	senja, err := id(`SELECT id FROM tenants WHERE slug = 'kopi-senja'`)
	if err != nil {
		return err
	}
	if _, err := d.System.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'member')
		ON CONFLICT DO NOTHING`, senja, joko); err != nil {
		return fmt.Errorf("demo leaver membership: %w", err)
	}
	support, err := id(`SELECT id FROM users WHERE email = 'support@jejak.test'`)
	if err != nil {
		return err
	}
	admin, err := id(`SELECT id FROM users WHERE email = 'admin@jejak.test'`)
	if err != nil {
		return err
	}
	melati, err := id(`SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	if err != nil {
		return err
	}
	rina, err := id(`SELECT id FROM users WHERE email = 'rina@melati.test'`)
	if err != nil {
		return err
	}
	a, err := d.Approvals.RequestDisable(ctx, approval.Staff{UserID: support, TraceID: "demo-disable-joko"}, senja, joko,
		"Joko keluar per 30 November; pemilik meminta aksesnya dicabut")
	if err != nil {
		return err
	}
	if _, err := d.Approvals.Approve(ctx, approval.Staff{UserID: admin, TraceID: "demo-disable-joko"}, a.ID, "dikonfirmasi dengan pemilik lewat telepon"); err != nil {
		return err
	}
	if _, err := d.Approvals.RequestDisable(ctx, approval.Staff{UserID: support, TraceID: "demo-disable-rina"}, melati, rina,
		"Pemilik melaporkan ponsel Rina hilang; menunggu konfirmasi kedua"); err != nil {
		return err
	}
	batik, err := id(`SELECT id FROM tenants WHERE slug = 'batik-nusantara'`)
	if err != nil {
		return err
	}
	if _, _, err := d.Payments.DemoDoubleCharge(ctx, batik, "pro", "demo-double-charge"); err != nil {
		return fmt.Errorf("demo double charge: %w", err)
	}
	return nil
}
