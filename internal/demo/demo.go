// Package demo fills a database with Jejak's demo tenants, accounts,
// projects and subscriptions. Seeding is idempotent: running it again
// changes nothing that is already there.
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/user"
)

// Password is every demo account's password. Demo only.
const Password = "jejak-demo"

// Account is a demo sign-in.
type Account struct {
	Email, Name, Tenant, Role string // Tenant/Role empty for staff
	Staff                     string
}

// Tenants are the demo tenants: slug, name, plan, projects.
var Tenants = []struct {
	Slug, Name, Plan string
	Projects         []string
}{
	{"toko-bunga-melati", "Toko Bunga Melati", "pro", []string{"Katalog Musim Hujan", "Landing Page Lebaran", "Buket Wisuda"}},
	{"kopi-senja", "Kopi Senja", "free", []string{"Menu Musim Kemarau", "Program Loyalitas"}},
	{"batik-nusantara", "Batik Nusantara", "pro", []string{"Koleksi Parang", "Toko Online"}},
}

// Accounts are the demo sign-ins (password Password).
var Accounts = []Account{
	{Email: "budi@melati.test", Name: "Budi Santoso", Tenant: "toko-bunga-melati", Role: "owner"},
	{Email: "rina@melati.test", Name: "Rina Wulandari", Tenant: "toko-bunga-melati", Role: "member"},
	{Email: "sari@senja.test", Name: "Sari Wulandari", Tenant: "kopi-senja", Role: "owner"},
	{Email: "agus@senja.test", Name: "Agus Pratama", Tenant: "kopi-senja", Role: "member"},
	{Email: "dewi@batik.test", Name: "Dewi Lestari", Tenant: "batik-nusantara", Role: "owner"},
	{Email: "putri@batik.test", Name: "Putri Ayu", Tenant: "batik-nusantara", Role: "member"},
	// Admins make changes in the live demo activity too, so the trail is
	// not one person's.
	{Email: "eko@melati.test", Name: "Eko Prasetyo", Tenant: "toko-bunga-melati", Role: "admin"},
	{Email: "joko@senja.test", Name: "Joko Susilo", Tenant: "kopi-senja", Role: "admin"},
	{Email: "wayan@batik.test", Name: "Wayan Sudarma", Tenant: "batik-nusantara", Role: "admin"},
	{Email: "support@jejak.test", Name: "Sinta Maharani", Staff: user.StaffSupport},
	{Email: "admin@jejak.test", Name: "Adi Nugroho", Staff: user.StaffAdmin},
}

// Seed writes the demo data through the cross-tenant (system) pool.
func Seed(ctx context.Context, system database.Beginner) error {
	hash, err := user.HashPassword(Password)
	if err != nil {
		return err
	}
	return database.InTx(ctx, system, func(tx pgx.Tx) error {
		for _, p := range []struct {
			code, name    string
			price, maxPrj int
		}{{"free", "Free", 0, 3}, {"pro", "Pro", 149000, 50}} {
			if _, err := tx.Exec(ctx, `INSERT INTO plans (code, name, price_idr, max_projects) VALUES ($1, $2, $3, $4)
				ON CONFLICT (code) DO NOTHING`, p.code, p.name, p.price, p.maxPrj); err != nil {
				return fmt.Errorf("seed plan %s: %w", p.code, err)
			}
		}
		tenantIDs := map[string]int64{}
		for _, t := range Tenants {
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO tenants (slug, name) VALUES ($1, $2)
				ON CONFLICT (slug) DO UPDATE SET name = tenants.name RETURNING id`, t.Slug, t.Name).Scan(&id); err != nil {
				return fmt.Errorf("seed tenant %s: %w", t.Slug, err)
			}
			tenantIDs[t.Slug] = id
			start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			if _, err := tx.Exec(ctx, `INSERT INTO subscriptions (tenant_id, plan_code, current_period_start, current_period_end)
				VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO NOTHING`, id, t.Plan, start, start.AddDate(1, 0, 0)); err != nil {
				return fmt.Errorf("seed subscription %s: %w", t.Slug, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO subscription_changes (tenant_id, from_plan, to_plan, changed_at)
				SELECT $1, NULL, $2, $3 WHERE NOT EXISTS (SELECT FROM subscription_changes WHERE tenant_id = $1)`, id, t.Plan, start); err != nil {
				return fmt.Errorf("seed subscription history %s: %w", t.Slug, err)
			}
		}
		users := user.NewStore(tx)
		userIDs := map[string]int64{}
		for _, a := range Accounts {
			u, err := users.Upsert(ctx, a.Email, a.Name, hash, a.Staff)
			if err != nil {
				return err
			}
			userIDs[a.Email] = u.ID
			if a.Tenant == "" {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)
				ON CONFLICT (tenant_id, user_id) DO NOTHING`, tenantIDs[a.Tenant], u.ID, a.Role); err != nil {
				return fmt.Errorf("seed membership %s: %w", a.Email, err)
			}
		}
		for _, t := range Tenants {
			owner := ownerOf(t.Slug)
			for _, name := range t.Projects {
				if _, err := tx.Exec(ctx, `INSERT INTO projects (tenant_id, name, created_by)
					SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT FROM projects WHERE tenant_id = $1 AND name = $2)`,
					tenantIDs[t.Slug], name, userIDs[owner]); err != nil {
					return fmt.Errorf("seed project %q: %w", name, err)
				}
			}
		}
		return nil
	})
}

func ownerOf(slug string) string {
	for _, a := range Accounts {
		if a.Tenant == slug && a.Role == "owner" {
			return a.Email
		}
	}
	return ""
}
