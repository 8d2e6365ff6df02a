package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// While an endpoint's breaker is open, one pending delivery (the holder)
// keeps a job that waits the breaker out and probes the endpoint when it
// ends; every other pending delivery that comes up is held: it stays
// pending, keeps its attempts, and has no job. Without holding, each
// pending delivery of a dead endpoint was claimed and put back every time
// the breaker half-opened, so the job queue's work grew with the backlog
// for as long as the endpoint stayed down (days, before it is disabled).
//
// Held deliveries go back to the queue, oldest first and at most
// heldBatch per endpoint at a time: when the holder's probe succeeds (in
// the transaction that closes the breaker) and on each pass of
// HeldSweep, which also hands an open breaker to a new holder when the
// old one ended without closing it, and fails the held deliveries of
// endpoints disabled or deleted meanwhile. Every later attempt that
// leaves the breaker closed releases one more: the backlog drains as fast
// as the endpoint takes it, about heldBatch at a time, rather than
// heldBatch per sweep pass (every 30 s: a day's backlog of one event a
// second took four hours).

// heldBatch bounds how many held deliveries of one endpoint are released
// (or failed) at once: a receiver that has just recovered gets its
// backlog in steps, and no transaction grows with the backlog.
const heldBatch = 200

// Why a delivery was settled as failed without an attempt.
const (
	errEndpointDisabled = "endpoint disabled"
	errEndpointDeleted  = "endpoint deleted"
)

// whyHeld is load's reason for a delivery it held.
const whyHeld = "held"

// releaseHeld takes up to limit of an endpoint's held deliveries off hold
// at now and enqueues a job for each, in tx; it returns how many.
func releaseHeld(ctx context.Context, tx pgx.Tx, jobs Enqueuer, tenantID, endpointID int64, limit int, now time.Time) (int, error) {
	rs, err := newStore(tx).releaseHeld(ctx, tenantID, endpointID, limit, now)
	if err != nil {
		return 0, fmt.Errorf("release held webhook deliveries: %w", err)
	}
	if len(rs) == 0 {
		return 0, nil
	}
	ps := make([]job.EnqueueParams, len(rs))
	for i, r := range rs {
		ps[i] = jobParams(tenantID, jobPayloadJSON(tenantID, r.id), nil, r.traceID, r.requestedBy, "")
	}
	if _, err := jobs.EnqueueMany(ctx, tx, ps); err != nil {
		return 0, fmt.Errorf("enqueue released webhook deliveries: %w", err)
	}
	return len(rs), nil
}

// HeldSweep is the periodic pass over the endpoints with held deliveries
// (the maintenance leader runs it): through System (jejak_system), one
// transaction per endpoint, it
//   - releases up to heldBatch of them when the endpoint's breaker is
//     closed (the probe's own release left more, or the owner enabled the
//     endpoint again);
//   - releases one when the breaker is open and no holder's job waits it
//     out (the holder failed for good, or was resent and succeeded), so
//     that one becomes the holder and the endpoint is probed again;
//   - fails up to heldBatch when the endpoint was disabled or deleted, as
//     their jobs would have.
type HeldSweep struct {
	System database.Beginner
	Jobs   Enqueuer
	Clock  clock.Clock
}

// heldPage is how many endpoints one query of the sweep lists.
const heldPage = 500

// Run makes one pass and returns how many held deliveries it released or
// failed.
func (h HeldSweep) Run(ctx context.Context) (int, error) {
	clk := h.Clock
	if clk == nil {
		clk = clock.Database{}
	}
	done := 0
	var afterTenant, afterEndpoint int64
	for {
		var eps []heldEndpoint
		err := database.InTx(ctx, h.System, func(tx pgx.Tx) (err error) {
			eps, err = newStore(tx).heldEndpoints(ctx, afterTenant, afterEndpoint, heldPage)
			return err
		})
		if err != nil {
			return done, fmt.Errorf("list endpoints with held webhook deliveries: %w", err)
		}
		for _, ep := range eps {
			n, err := h.endpoint(ctx, clk, ep)
			done += n
			if err != nil {
				return done, err
			}
		}
		if len(eps) < heldPage {
			return done, nil
		}
		afterTenant, afterEndpoint = eps[len(eps)-1].tenantID, eps[len(eps)-1].id
	}
}

// heldEndpoint is an endpoint with held deliveries, as the sweep found it.
type heldEndpoint struct {
	tenantID, id                                 int64
	enabled, deleted, breakerOpen, holderWaiting bool
}

func (h HeldSweep) endpoint(ctx context.Context, clk clock.Clock, ep heldEndpoint) (int, error) {
	n := 0
	err := database.InTx(ctx, h.System, func(tx pgx.Tx) error {
		now, err := dbNow(ctx, tx, clk)
		if err != nil {
			return err
		}
		switch {
		case ep.deleted || !ep.enabled:
			why := errEndpointDisabled
			if ep.deleted {
				why = errEndpointDeleted
			}
			failed, err := newStore(tx).failHeld(ctx, ep.tenantID, ep.id, heldBatch, why, now)
			n = int(failed)
			return err
		case !ep.breakerOpen:
			n, err = releaseHeld(ctx, tx, h.Jobs, ep.tenantID, ep.id, heldBatch, now)
		case !ep.holderWaiting:
			n, err = releaseHeld(ctx, tx, h.Jobs, ep.tenantID, ep.id, 1, now)
		}
		return err
	})
	if err != nil {
		return n, fmt.Errorf("held webhook deliveries of endpoint %d (tenant %d): %w", ep.id, ep.tenantID, err)
	}
	return n, nil
}
