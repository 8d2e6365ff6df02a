package job

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one in the package that touches sqlc's types: it
// converts rows into domain types and maps pgx.ErrNoRows to the package's
// errors. (claim.sql is run here too: the claim is hand-written SQL, since
// its per-tenant LIMIT needs a shape sqlc cannot express.)

//go:embed claim.sql
var claimSQL string

// claimPausedFilter is claim.sql's paused-kinds line, the only use of its
// last parameter, $14.
const claimPausedFilter = "AND j.kind <> ALL($14::text[]) -- paused kinds"

// claimAnyKindSQL is the fair claim when no kind is paused (see claim.sql's
// header for why it is a separate statement).
var claimAnyKindSQL = func() string {
	if strings.Count(claimSQL, claimPausedFilter) != 1 || strings.Count(claimSQL, "$14::") != 1 {
		panic("job: claim.sql must use $14 once, in its paused-kinds filter")
	}
	return strings.Replace(claimSQL, claimPausedFilter, "", 1)
}()

// epoch is the "no value" sentinel for nullable timestamps in bulk arrays
// (the query turns it back into NULL / now()).
var epoch = time.Unix(0, 0).UTC()

type insertRow struct {
	ID             int64
	TenantID       int64
	Kind           string
	IdempotencyKey string
}

// storeInsert writes resolved params in one statement and returns the rows
// actually inserted (idempotency conflicts are absent), in input order.
func storeInsert(ctx context.Context, db queries.DBTX, now *time.Time, ps []EnqueueParams) ([]insertRow, error) {
	n := len(ps)
	arg := queries.JobInsertManyParams{
		Now:             now,
		TenantIds:       make([]int64, n),
		Kinds:           make([]string, n),
		Queues:          make([]string, n),
		Priorities:      make([]int16, n),
		Payloads:        make([]string, n),
		MaxAttempts:     make([]int32, n),
		AvailableAts:    make([]time.Time, n),
		TraceIds:        make([]string, n),
		RequestedBys:    make([]int64, n),
		ExpiresAts:      make([]time.Time, n),
		IdempotencyKeys: make([]string, n),
	}
	for i, p := range ps {
		arg.TenantIds[i] = p.TenantID
		arg.Kinds[i] = p.Kind
		arg.Queues[i] = p.Queue
		arg.Priorities[i] = p.Priority
		arg.Payloads[i] = string(p.Payload)
		arg.MaxAttempts[i] = int32(p.MaxAttempts)
		arg.AvailableAts[i] = epoch
		if p.AvailableAt != nil {
			arg.AvailableAts[i] = *p.AvailableAt
		}
		arg.TraceIds[i] = p.TraceID
		if p.RequestedBy != nil {
			arg.RequestedBys[i] = *p.RequestedBy
		}
		arg.ExpiresAts[i] = epoch
		if p.ExpiresAt != nil {
			arg.ExpiresAts[i] = *p.ExpiresAt
		}
		arg.IdempotencyKeys[i] = p.IdempotencyKey
	}
	rows, err := queries.New(db).JobInsertMany(ctx, arg)
	if err != nil {
		return nil, err
	}
	out := make([]insertRow, len(rows))
	for i, r := range rows {
		out[i] = insertRow{ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, IdempotencyKey: ptr.Value(r.IdempotencyKey)}
	}
	return out, nil
}

func storeGetByIdempotencyKey(ctx context.Context, db queries.DBTX, tenantID int64, kind, key string) (int64, error) {
	id, err := queries.New(db).JobGetByIdempotencyKey(ctx, queries.JobGetByIdempotencyKeyParams{
		TenantID: tenantID, Kind: kind, IdempotencyKey: &key,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNotFound
	}
	return id, err
}

type claimArgs struct {
	now               *time.Time
	queue             string
	workerID          string
	batch             int
	lease             time.Duration
	afterTenant       int64
	maxTenants        int
	perTenant         int // minimum share
	maxShare          int
	tenantConcurrency int
	fair              bool
	slot              slot // the tenants this claim walks: those of the slot
	pausedKinds       []string
}

// fairClaim is one pass of the fair claim: the jobs, and what the tenant
// walk saw, which decides whether another pass can find more.
type fairClaim struct {
	jobs    []*Job
	tenants int   // tenants with due work the walk visited
	last    int64 // the highest of them (0 = none)
	// fullQuota: some tenant got its whole share of the batch, so it may
	// have more due jobs. A quota the per-tenant cap cut below the share
	// does not count: the tenant has no place left for more.
	fullQuota bool
	// deepShare is the smallest share of the tenants the walk visited when
	// every one of them filled it (0 when one did not): they all had at
	// least that many due jobs. A tenant one short counts as filling it:
	// the shares are rounded up, so the batch limit cuts at most one job
	// from each.
	deepShare int
}

// claimGenericPlan has the rest of the transaction (the claim's own
// implicit one, when both go in one batch) use cached generic plans.
const claimGenericPlan = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

// claimConn runs the claim: a connection or a transaction.
type claimConn interface {
	queries.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func storeClaim(ctx context.Context, db claimConn, a claimArgs) (fairClaim, error) {
	sl := a.slot.orAll()
	args := []any{a.now, a.queue, a.workerID, a.batch, a.lease.Seconds(),
		a.afterTenant, a.maxTenants, a.perTenant, a.tenantConcurrency, a.fair, a.maxShare,
		sl.members, sl.rank}
	var rows pgx.Rows
	var err error
	if len(a.pausedKinds) > 0 {
		// Rare (an operator paused a kind): planned with the actual list
		// every time, as an unnamed statement.
		rows, err = db.Query(ctx, claimSQL, append([]any{pgx.QueryExecModeExec}, append(args, a.pausedKinds)...)...)
	} else {
		// The generic plan, forced for the claim's own transaction in the
		// same round trip (claim.sql's header says why).
		b := &pgx.Batch{}
		b.Queue(claimGenericPlan)
		b.Queue(claimAnyKindSQL, args...)
		br := db.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fairClaim{}, err
		}
		rows, err = br.Query()
	}
	if err != nil {
		return fairClaim{}, err
	}
	defer rows.Close()
	var (
		out          fairClaim
		tenants      int32
		quota, share int32
	)
	perTenant := map[int64]int32{}
	quotas := map[int64]int32{}
	for rows.Next() {
		// The walk's figures come with every row, and alone (job columns
		// NULL) when nothing was claimed.
		if rows.RawValues()[2] == nil {
			if err := rows.Scan(append([]any{&tenants, &out.last}, make([]any, claimedColumns+2)...)...); err != nil {
				return fairClaim{}, err
			}
			continue
		}
		var c claimedRow
		dest := append([]any{&tenants, &out.last}, c.dest()...)
		if err := rows.Scan(append(dest, &quota, &share)...); err != nil {
			return fairClaim{}, err
		}
		j := c.job(a.workerID)
		perTenant[j.TenantID]++
		quotas[j.TenantID] = quota
		if perTenant[j.TenantID] >= quota && quota >= share {
			out.fullQuota = true
		}
		out.jobs = append(out.jobs, j)
	}
	out.tenants = int(tenants)
	if out.tenants > 0 && len(perTenant) == out.tenants {
		out.deepShare = int(slices.Min(slices.Collect(maps.Values(quotas))))
		for t, n := range perTenant {
			if n < quotas[t]-1 {
				out.deepShare = 0
			}
		}
	}
	return out, rows.Err()
}

//go:embed claim_small.sql
var claimSmallSQL string

// storeClaimSmall runs claim_small.sql: all due jobs of the queue when at
// most a batch is due in the whole table (fits), else nothing (fits false:
// the fair claim must decide who goes first).
func storeClaimSmall(ctx context.Context, db queries.DBTX, a claimArgs) (jobs []*Job, fits bool, err error) {
	rows, err := db.Query(ctx, claimSmallSQL, a.now, a.queue, a.workerID, a.batch, a.lease.Seconds(),
		pausedOrEmpty(a.pausedKinds))
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		if rows.RawValues()[1] == nil {
			if err := rows.Scan(append([]any{&fits}, make([]any, claimedColumns)...)...); err != nil {
				return nil, false, err
			}
			continue
		}
		var c claimedRow
		if err := rows.Scan(append([]any{&fits}, c.dest()...)...); err != nil {
			return nil, false, err
		}
		j := c.job(a.workerID)
		jobs = append(jobs, j)
	}
	return jobs, fits, rows.Err()
}

// claimedColumns is the number of job columns both claims return per row
// (claimedRow.dest).
const claimedColumns = 21

// claimedRow scans the job columns of a claim's RETURNING list (the same
// order in claim.sql and claim_small.sql).
type claimedRow struct {
	j                    Job
	attempt, maxAttempts int32
	payload              []byte
	key                  *string
	attemptedAt          *time.Time
	lease                *time.Time
	version              int32
}

func (c *claimedRow) dest() []any {
	j := &c.j
	return []any{&j.ID, &j.TenantID, &j.Kind, &j.Queue, &j.Priority, &c.payload,
		&c.attempt, &c.maxAttempts, &j.AvailableAt, &j.CreatedAt, &c.attemptedAt, &j.TraceID,
		&j.RequestedBy, &j.RequestedAt, &j.ExpiresAt, &c.key, &j.PayloadHash, &c.lease, &c.version, &j.ReplayedBy, &j.payloadIntact}
}

func (c *claimedRow) job(workerID string) *Job {
	j := c.j
	j.Payload = json.RawMessage(c.payload)
	j.Attempt, j.MaxAttempts = int(c.attempt), int(c.maxAttempts)
	j.IdempotencyKey = ptr.Value(c.key)
	j.PayloadVersion = int(c.version)
	j.WorkerID = workerID
	if c.attemptedAt != nil {
		j.AttemptedAt = *c.attemptedAt
	}
	if c.lease != nil {
		j.LeaseExpiresAt = *c.lease
	}
	return &j
}

// claimToken identifies one claim of one job: the worker and the attempt it
// claimed. Every write that ends or extends a claim is fenced by it. The
// job is addressed by its primary key (tenant, id).
type claimToken struct {
	tenantID int64
	id       int64
	attempt  int
}

// tokenArrays spells claims out as the batched statements' arrays, in
// primary-key order. Those statements lock the rows in the order of their
// arrays, and two of them run at once on the same rows (the heartbeat's
// renewal, from its own connection, and the completer's batch): in any
// two orders of their own they could each hold a row the other waits for,
// a deadlock PostgreSQL breaks only after deadlock_timeout by failing one.
func tokenArrays(ts []claimToken) (tenantIDs, ids []int64, attempts []int32) {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b claimToken) int {
		return cmp.Or(cmp.Compare(a.tenantID, b.tenantID), cmp.Compare(a.id, b.id))
	})
	tenantIDs, ids, attempts = make([]int64, len(ts)), make([]int64, len(ts)), make([]int32, len(ts))
	for i, t := range ts {
		tenantIDs[i], ids[i], attempts[i] = t.tenantID, t.id, int32(t.attempt)
	}
	return tenantIDs, ids, attempts
}

func storeCompleteMany(ctx context.Context, db queries.DBTX, now *time.Time, workerID string, ts []claimToken) ([]int64, error) {
	tenantIDs, ids, attempts := tokenArrays(ts)
	return queries.New(db).JobSetCompletedMany(ctx, queries.JobSetCompletedManyParams{
		Now: now, TenantIds: tenantIDs, Ids: ids, Attempts: attempts, WorkerID: workerID,
	})
}

func storeComplete(ctx context.Context, db queries.DBTX, now *time.Time, workerID string, t claimToken) (bool, error) {
	done, err := queries.New(db).JobSetCompleted(ctx, queries.JobSetCompletedParams{
		Now: now, TenantID: t.tenantID, ID: t.id, Attempt: int32(t.attempt), WorkerID: workerID})
	return len(done) == 1, err
}

// storeGetHeld returns the claim a worker holds on job id, or ErrNotHeld.
func storeGetHeld(ctx context.Context, db queries.DBTX, workerID string, id int64) (claimToken, error) {
	r, err := queries.New(db).JobGetHeld(ctx, queries.JobGetHeldParams{ID: id, WorkerID: workerID})
	if errors.Is(err, pgx.ErrNoRows) {
		return claimToken{}, ErrNotHeld
	}
	if err != nil {
		return claimToken{}, err
	}
	return claimToken{tenantID: r.TenantID, id: id, attempt: int(r.Attempt)}, nil
}

// storeFail records a failed attempt; ErrNotHeld when the worker does not
// hold that attempt.
func storeFail(ctx context.Context, db queries.DBTX, now *time.Time, workerID string, t claimToken,
	class Class, msg string, backoff time.Duration) (State, error) {
	r, err := queries.New(db).JobSetFailed(ctx, queries.JobSetFailedParams{
		Class: string(class), Now: now, BackoffSeconds: backoff.Seconds(), Error: msg,
		TenantID: t.tenantID, ID: t.id, Attempt: int32(t.attempt), WorkerID: workerID,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotHeld
	}
	if err != nil {
		return "", err
	}
	return State(r.State), nil
}

// storeRescue returns how many rescued jobs were retried and which died.
func storeRescue(ctx context.Context, db queries.DBTX, now *time.Time) (retried int, dead []int64, err error) {
	rows, err := queries.New(db).JobRescueExpired(ctx, now)
	if err != nil {
		return 0, nil, err
	}
	for _, r := range rows {
		if State(r.State) == StateDead {
			dead = append(dead, r.ID)
		} else {
			retried++
		}
	}
	return retried, dead, nil
}

func storeRelease(ctx context.Context, db queries.DBTX, workerID string, ts []claimToken) (int64, error) {
	tenantIDs, ids, attempts := tokenArrays(ts)
	return queries.New(db).JobReleaseMany(ctx, queries.JobReleaseManyParams{
		TenantIds: tenantIDs, Ids: ids, Attempts: attempts, WorkerID: workerID})
}

// storeRenew extends the leases of the given claims and returns the ids of
// those the worker still holds.
func storeRenew(ctx context.Context, db queries.DBTX, now *time.Time, workerID string, ts []claimToken, lease time.Duration) ([]int64, error) {
	tenantIDs, ids, attempts := tokenArrays(ts)
	return queries.New(db).JobRenewLeases(ctx, queries.JobRenewLeasesParams{
		Now: now, LeaseSeconds: lease.Seconds(), TenantIds: tenantIDs, Ids: ids, Attempts: attempts, WorkerID: workerID,
	})
}

func storeDeleteFinished(ctx context.Context, db queries.DBTX, now *time.Time, states []State, olderThan time.Duration, limit int) (int64, error) {
	ss := make([]string, len(states))
	for i, s := range states {
		ss[i] = string(s)
	}
	return queries.New(db).JobDeleteFinished(ctx, queries.JobDeleteFinishedParams{
		States: ss, Now: now, OlderThanSeconds: olderThan.Seconds(), MaxRows: int32(limit),
	})
}

// storeStatsPrune deletes rollup minutes older than olderThan.
func storeStatsPrune(ctx context.Context, db queries.DBTX, now *time.Time, olderThan time.Duration) (int64, error) {
	return queries.New(db).JobStatsPrune(ctx, queries.JobStatsPruneParams{Now: now, OlderThanSeconds: olderThan.Seconds()})
}

// storeStatsFoldDays folds the minutes since the last fold into days.
func storeStatsFoldDays(ctx context.Context, db queries.DBTX, now *time.Time) (int64, error) {
	return queries.New(db).JobStatsFoldDays(ctx, now)
}

func storeNotify(ctx context.Context, db queries.DBTX) error {
	return queries.New(db).JobNotify(ctx)
}

// WorkerInfo is one engine's heartbeat row, for the dashboard.
type WorkerInfo struct {
	WorkerID      string
	StartedAt     time.Time
	LastHeartbeat time.Time
	Running       int
	Capacity      int
	Queues        []string
	Leader        bool
}

// storeWorkerUpsert registers w's beat and returns its slot among the
// workers of its queues that beat within live.
func storeWorkerUpsert(ctx context.Context, db queries.DBTX, now *time.Time, w WorkerInfo, live time.Duration) (slot, error) {
	row, err := queries.New(db).JobWorkerUpsert(ctx, queries.JobWorkerUpsertParams{
		WorkerID: w.WorkerID, Now: now, Running: int32(w.Running), Capacity: int32(w.Capacity),
		Queues: w.Queues, Leader: w.Leader, LiveSeconds: live.Seconds(),
	})
	return slot{members: int(row.Members), rank: int(row.Rank)}, err
}

func storeWorkerDelete(ctx context.Context, db queries.DBTX, workerID string) error {
	return queries.New(db).JobWorkerDelete(ctx, workerID)
}

func storeWorkerDeleteStale(ctx context.Context, db queries.DBTX, now *time.Time, olderThan time.Duration) (int64, error) {
	return queries.New(db).JobWorkerDeleteStale(ctx, queries.JobWorkerDeleteStaleParams{Now: now, OlderThanSeconds: olderThan.Seconds()})
}

// storeCountsFold folds the appended unfinished-count deltas into
// job_counts (see JobCountsFold).
func storeCountsFold(ctx context.Context, db queries.DBTX) (int64, error) {
	return queries.New(db).JobCountsFold(ctx)
}

func storeUnfinished(ctx context.Context, db queries.DBTX) (int64, error) {
	return queries.New(db).JobUnfinishedTotal(ctx)
}

// storeRebuildCounts recounts job_counts and job_dead_groups from jobs;
// the caller provides the transaction.
func storeRebuildCounts(ctx context.Context, tx queries.DBTX) error {
	q := queries.New(tx)
	if err := q.JobCountsRebuild(ctx); err != nil {
		return err
	}
	if _, err := q.JobCountsFold(ctx); err != nil {
		return err
	}
	if err := q.JobCountsScheduledRefresh(ctx, nil); err != nil {
		return err
	}
	if err := q.JobDeadGroupsClear(ctx); err != nil {
		return err
	}
	return q.JobDeadGroupsRebuild(ctx)
}

// storeCountScheduled recounts the jobs scheduled ahead per tenant and
// kind into job_counts (as of now, or the database's time when nil).
func storeCountScheduled(ctx context.Context, db queries.DBTX, now *time.Time) error {
	return queries.New(db).JobCountsScheduledRefresh(ctx, now)
}
