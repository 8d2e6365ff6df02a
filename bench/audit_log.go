package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/audit"
)

// The audit log at scale, on the scale database (pages.go seeds and seals
// it): inclusion and consistency proofs of Melati's tree (the biggest) at
// random positions, one at a time, through audit.Service as the log routes
// call it; then `web audit verify`'s walk of every tenant's log, as events
// per second.

func init() {
	register(Bench{Name: "audit_log", Run: auditLogBench})
}

// benchLogSeed is the Ed25519 seed of the key that signs the scale
// database's checkpoints. It is fixed so a reused database's checkpoints
// verify in a later run; it signs nothing outside the benchmark.
func benchLogSeed() []byte {
	seed := sha256.Sum256([]byte("jejak bench scale database log key"))
	return seed[:]
}

// benchLogSigner signs with benchLogSeed's key, as the sealers the
// benchmarks run in process do.
func benchLogSigner() (*audit.LogSigner, error) {
	return audit.NewLogSigner(ed25519.NewKeyFromSeed(benchLogSeed()))
}

// writeBenchAnchorDir makes dir an anchor directory (JEJAK_ANCHOR_DIR)
// holding benchLogSeed's key: a server run over the scale database seals
// what its requests write, and checkpoints signed with a key of its own
// would make the database's logs fail verification in audit_log from then
// on (and the server refuse to start on them).
func writeBenchAnchorDir(dir string) error {
	_, err := anchor.OpenWithKey(dir, benchLogSeed())
	return err
}

// sealScale seals whatever waits in the scale database (all of it after a
// seed) and prints how fast.
func sealScale(ctx context.Context, system *pgxpool.Pool) error {
	signer, err := benchLogSigner()
	if err != nil {
		return err
	}
	var waiting int64
	if err := system.QueryRow(ctx, `SELECT count(*) FROM audit_unsealed`).Scan(&waiting); err != nil {
		return err
	}
	if waiting == 0 {
		return nil
	}
	fmt.Printf("# sealing %d audit events\n", waiting)
	start := time.Now()
	if err := audit.NewSealer(system, audit.SealerOptions{Signer: signer}).Drain(ctx); err != nil {
		return fmt.Errorf("seal the scale database: %w", err)
	}
	d := time.Since(start)
	fmt.Printf("# sealed %d events in %s (%.0f/s)\n", waiting, d.Round(time.Second), float64(waiting)/d.Seconds())
	return nil
}

func auditLogBench(ctx context.Context, env *Env, _ string) (Result, error) {
	s, err := getScale(ctx, env)
	if err != nil {
		return Result{}, err
	}
	signer, err := benchLogSigner()
	if err != nil {
		return Result{}, err
	}
	svc := audit.NewService(s.app, s.system)
	svc.UseVerifierKey(signer.VerifierKey())
	var size int64
	if err := s.system.QueryRow(ctx, `SELECT size FROM audit_trees WHERE tenant_id = $1`, s.melati).Scan(&size); err != nil {
		return Result{}, fmt.Errorf("melati's tree: %w", err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1000
	inclusion := make([]time.Duration, 0, n)
	for range n {
		seq := 1 + rng.Int64N(size)
		t0 := time.Now()
		if _, err := svc.ProveInclusion(ctx, s.melati, seq); err != nil {
			return Result{}, fmt.Errorf("prove %d: %w", seq, err)
		}
		inclusion = append(inclusion, time.Since(t0))
	}
	consistency := make([]time.Duration, 0, n)
	for range n {
		from := 1 + rng.Int64N(size)
		t0 := time.Now()
		if _, err := svc.ProveConsistency(ctx, s.melati, from, size); err != nil {
			return Result{}, fmt.Errorf("prove %d → %d: %w", from, size, err)
		}
		consistency = append(consistency, time.Since(t0))
	}

	t0 := time.Now()
	results, err := svc.VerifyAll(ctx, nil)
	if err != nil {
		return Result{}, err
	}
	walk := time.Since(t0)
	var events int64
	for _, r := range results {
		if !r.OK {
			return Result{}, fmt.Errorf("tenant %d's log does not verify: seq %d: %s", r.TenantID, r.FirstBadSeq, r.Reason)
		}
		events += r.TreeSize
	}
	return Result{Metrics: []Metric{
		{"tree_size", float64(size)},
		{"inclusion_p50_ms", pctMs(inclusion, 0.50)},
		{"inclusion_p95_ms", pctMs(inclusion, 0.95)},
		{"consistency_p95_ms", pctMs(consistency, 0.95)},
		{"verified_events", float64(events)},
		{"verify_events_per_sec", float64(events) / walk.Seconds()},
	}}, nil
}

// pctMs is the p-th percentile of ds in milliseconds (ds is sorted).
func pctMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
}
