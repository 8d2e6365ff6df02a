package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descJobs = prometheus.NewDesc(Namespace+"_jobs", "Live jobs by state, from the cached queue snapshot.", []string{"state"}, nil)
	descAge  = prometheus.NewDesc(Namespace+"_queue_oldest_pending_age_seconds",
		"How long the oldest due pending job of each queue has waited, from the cached queue snapshot.", []string{"queue"}, nil)
	descOutbox    = prometheus.NewDesc(Namespace+"_outbox_messages", "Outbox messages by state.", []string{"state"}, nil)
	descOutboxAge = prometheus.NewDesc(Namespace+"_outbox_oldest_pending_age_seconds",
		"How long the oldest unpublished outbox message has waited.", nil, nil)
	descUnsealed    = prometheus.NewDesc(Namespace+"_audit_unsealed_events", "Audit events committed but not yet sealed into their tenant's log.", nil, nil)
	descUnsealedAge = prometheus.NewDesc(Namespace+"_audit_oldest_unsealed_age_seconds",
		"How long the oldest unsealed audit event has waited for the sealer.", nil, nil)
	descUnindexed = prometheus.NewDesc(Namespace+"_audit_unindexed_events",
		"Sealed audit events the name search's index does not cover yet (searched by their text until it does).", nil, nil)
	descSnapAge = prometheus.NewDesc(Namespace+"_queue_snapshot_age_seconds",
		"Age of the queue snapshot the job gauges were read from.", nil, nil)
)

// liveStates are always reported, so a state that empties reads 0 rather
// than vanishing.
var liveStates = []string{"pending", "running", "dead"}

// outboxStates are always reported for the same reason.
var outboxStates = []string{"pending", "processing", "failed"}

// snapshotCollector reads the queue and outbox gauges at scrape time from
// a snapshot shared by all scrapes for maxAge (single flight), so any
// number of Prometheus servers cost one snapshot per period.
type snapshotCollector struct {
	o      Options
	maxAge time.Duration

	mu     sync.Mutex
	snap   *QueueSnapshot
	outbox OutboxSnapshot
	audit  AuditSnapshot
	at     time.Time
}

func newSnapshotCollector(o Options) *snapshotCollector {
	c := &snapshotCollector{o: o, maxAge: o.SnapshotMaxAge}
	if c.maxAge == 0 {
		c.maxAge = 5 * time.Second
	}
	return c
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobs
	ch <- descAge
	ch <- descOutbox
	ch <- descOutboxAge
	ch <- descSnapAge
	ch <- descUnsealed
	ch <- descUnsealedAge
	ch <- descUnindexed
}

func (c *snapshotCollector) load() (*QueueSnapshot, OutboxSnapshot, AuditSnapshot, time.Duration) {
	c.mu.Lock() // held during a load: concurrent scrapes wait and share it
	defer c.mu.Unlock()
	now := time.Now()
	if c.at.IsZero() || c.maxAge < 0 || now.Sub(c.at) > c.maxAge {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c.o.Snapshot != nil {
			if s, err := c.o.Snapshot(ctx); err == nil {
				c.snap = s
			}
		}
		if c.o.Outbox != nil {
			if s, err := c.o.Outbox(ctx); err == nil {
				c.outbox = s
			}
		}
		if c.o.Audit != nil {
			if s, err := c.o.Audit(ctx); err == nil {
				c.audit = s
			}
		}
		c.at = now
	}
	return c.snap, c.outbox, c.audit, now.Sub(c.at)
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	snap, outbox, audit, age := c.load()
	if c.o.Snapshot != nil {
		ch <- prometheus.MustNewConstMetric(descSnapAge, prometheus.GaugeValue, age.Seconds())
		jobs := map[string]int64{}
		ages := map[string]time.Duration{}
		for _, q := range c.o.Queues {
			ages[q] = 0
		}
		if snap != nil {
			for k, v := range snap.Jobs {
				jobs[k] = v
			}
			for k, v := range snap.OldestPendingAge {
				ages[k] = v
			}
		}
		for _, st := range liveStates {
			if _, ok := jobs[st]; !ok {
				jobs[st] = 0
			}
		}
		for st, n := range jobs {
			ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), st)
		}
		for q, a := range ages {
			ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, a.Seconds(), q)
		}
	}
	msgs := map[string]int64{}
	for _, st := range outboxStates {
		msgs[st] = 0
	}
	for k, v := range outbox.Messages {
		msgs[k] = v
	}
	for st, n := range msgs {
		ch <- prometheus.MustNewConstMetric(descOutbox, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(descOutboxAge, prometheus.GaugeValue, outbox.OldestPendingAge.Seconds())
	ch <- prometheus.MustNewConstMetric(descUnsealed, prometheus.GaugeValue, float64(audit.Unsealed))
	ch <- prometheus.MustNewConstMetric(descUnsealedAge, prometheus.GaugeValue, audit.OldestUnsealedAge.Seconds())
	ch <- prometheus.MustNewConstMetric(descUnindexed, prometheus.GaugeValue, float64(audit.Unindexed))
}

var (
	descPoolConns = prometheus.NewDesc(Namespace+"_db_pool_connections", "Database pool connections by state.", []string{"pool", "state"}, nil)
	descPoolMax   = prometheus.NewDesc(Namespace+"_db_pool_max_connections", "Database pool size limit.", []string{"pool"}, nil)
	descPoolAcq   = prometheus.NewDesc(Namespace+"_db_pool_acquires_total", "Connections acquired from the pool.", []string{"pool"}, nil)
	descPoolEmpty = prometheus.NewDesc(Namespace+"_db_pool_empty_acquires_total",
		"Acquires that had to wait because the pool had no idle connection.", []string{"pool"}, nil)
	descPoolWait = prometheus.NewDesc(Namespace+"_db_pool_acquire_wait_seconds_total",
		"Total time spent waiting for a pool connection.", []string{"pool"}, nil)
	descPoolCancel = prometheus.NewDesc(Namespace+"_db_pool_canceled_acquires_total",
		"Acquires cancelled before a connection was available.", []string{"pool"}, nil)
)

// poolCollector reports pgxpool statistics (in-memory, free to read).
type poolCollector struct{ pools map[string]*pgxpool.Pool }

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolConns, descPoolMax, descPoolAcq, descPoolEmpty, descPoolWait, descPoolCancel} {
		ch <- d
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, pool := range p.pools {
		s := pool.Stat()
		ch <- prometheus.MustNewConstMetric(descPoolConns, prometheus.GaugeValue, float64(s.AcquiredConns()), name, "acquired")
		ch <- prometheus.MustNewConstMetric(descPoolConns, prometheus.GaugeValue, float64(s.IdleConns()), name, "idle")
		ch <- prometheus.MustNewConstMetric(descPoolConns, prometheus.GaugeValue, float64(s.ConstructingConns()), name, "constructing")
		ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, float64(s.MaxConns()), name)
		ch <- prometheus.MustNewConstMetric(descPoolAcq, prometheus.CounterValue, float64(s.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(descPoolEmpty, prometheus.CounterValue, float64(s.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(descPoolWait, prometheus.CounterValue, s.AcquireDuration().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descPoolCancel, prometheus.CounterValue, float64(s.CanceledAcquireCount()), name)
	}
}

var descFanout = prometheus.NewDesc(Namespace+"_webhook_fanout_pending",
	"Events published to JetStream that this replica's webhook fan-out consumer has not recorded as deliveries yet (pending plus unacknowledged).", nil, nil)

// fanoutCollector reports the webhook fan-out's backlog once the outbox
// runtime has connected to NATS (Registry.WatchFanout); before that, and
// when NATS does not answer, it reports nothing rather than a zero that
// would read as "caught up".
type fanoutCollector struct {
	pending atomic.Pointer[func(context.Context) (int64, error)]
}

func (c *fanoutCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descFanout }

func (c *fanoutCollector) Collect(ch chan<- prometheus.Metric) {
	fn := c.pending.Load()
	if fn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := (*fn)(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descFanout, prometheus.GaugeValue, float64(n))
}
