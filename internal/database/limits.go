package database

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionLimits bound what one connection of a pool may hold: a statement
// that runs longer is cancelled, and a transaction left idle is ended with
// its connection, so one stuck request cannot keep locks or a pool slot.
type SessionLimits struct {
	Statement         time.Duration // statement_timeout
	IdleInTransaction time.Duration // idle_in_transaction_session_timeout
}

// Limits per role: tenant-facing requests are short; the system pool also
// serves staff pages and the engine's batch statements.
var (
	AppLimits    = SessionLimits{Statement: 15 * time.Second, IdleInTransaction: 30 * time.Second}
	SystemLimits = SessionLimits{Statement: 60 * time.Second, IdleInTransaction: 60 * time.Second}
)

// limitsFor returns the limits of the pool that runs as role.
func limitsFor(role string) SessionLimits {
	if role == AppRole {
		return AppLimits
	}
	return SystemLimits
}

// apply sets the limits, and the planner settings every pool shares, as
// connection parameters, sent when each connection starts, unless the URL
// already sets them (an operator's choice wins).
func (l SessionLimits) apply(cfg *pgxpool.Config) {
	p := cfg.ConnConfig.RuntimeParams
	if _, set := p["statement_timeout"]; !set && l.Statement > 0 {
		p["statement_timeout"] = strconv.FormatInt(l.Statement.Milliseconds(), 10)
	}
	if _, set := p["idle_in_transaction_session_timeout"]; !set && l.IdleInTransaction > 0 {
		p["idle_in_transaction_session_timeout"] = strconv.FormatInt(l.IdleInTransaction.Milliseconds(), 10)
	}
	// Every statement here reads a few rows through an index, but the
	// planner's cost of a statement over a big table (the fair claim walks
	// jobs_claim_idx, estimated at 100k+) crosses jit_above_cost, and JIT
	// then spends 40 ms compiling for a 5 ms statement.
	if _, set := p["jit"]; !set {
		p["jit"] = "off"
	}
	// PostgreSQL's default random_page_cost (4) prices a page read through
	// an index as a disk seek. Jejak's reads hit cached pages, and at 4 the
	// planner chose plans that read far more than they show: the trail's
	// join to a short, growing audit_leaves scanned all of the tenant's
	// leaves once per event on the page (a cached generic plan kept it as
	// the table grew), and at 1M jobs a tenant's dead count walked the
	// all-tenant dead index (22k buffers) rather than the tenant's (1k).
	// 1.1 is the usual setting for cached or SSD-backed data.
	if _, set := p["random_page_cost"]; !set {
		p["random_page_cost"] = "1.1"
	}
}
