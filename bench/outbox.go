package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
)

// outbox_relay: N committed rows relayed from PostgreSQL to JetStream
// (msgs_per_sec), then a steady load at a fixed rate for a while, timing
// each message from its commit to its arrival on a NATS subscriber of the
// stream's subjects (the server forwards a JetStream publish to core
// subscribers as it stores it, so this is commit→stored; p50/p99). Jejak's
// relay against watermill-sql's PostgreSQL subscriber forwarding to the
// same kind of JetStream (one fresh embedded nats-server per run) with a
// synchronous publish per message and an ack to watermill after it, the
// way a watermill forwarder works.
func init() {
	register(Bench{Name: "outbox_relay", Systems: []string{"jejak", "watermill"}, Run: runOutbox})
}

func (c Config) outboxDefaults() (msgs, rate int, dur time.Duration) {
	msgs, rate, dur = c.OutboxMsgs, c.OutboxRate, c.OutboxDuration
	if msgs <= 0 {
		msgs = 1000
	}
	if rate <= 0 {
		rate = 200
	}
	if dur <= 0 {
		dur = time.Second
	}
	return
}

// arrivals records when each message id reached the NATS subscriber.
type arrivals struct {
	mu   sync.Mutex
	at   map[string]time.Time
	want int
	all  chan struct{}
}

func (a *arrivals) expect(n int) {
	a.mu.Lock()
	a.want = n
	a.all = make(chan struct{})
	if len(a.at) >= n {
		close(a.all)
	}
	a.mu.Unlock()
}

func (a *arrivals) add(id string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.at[id]; dup {
		return
	}
	a.at[id] = t
	if a.all != nil && len(a.at) == a.want {
		close(a.all)
	}
}

func (a *arrivals) wait(ctx context.Context) error {
	a.mu.Lock()
	ch := a.all
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		defer a.mu.Unlock()
		return fmt.Errorf("%d of %d messages arrived: %w", len(a.at), a.want, ctx.Err())
	}
}

// startNATS starts a fresh nats-server with JetStream on a loopback port,
// connects to it and declares Jejak's stream. stop (never nil) closes the
// connection, shuts the server down and removes its store, whatever
// part of this failed.
func startNATS(ctx context.Context) (ns *server.Server, nc *nats.Conn, js jetstream.JetStream, stop func(), err error) {
	dir, err := os.MkdirTemp("", "jejak-bench-nats")
	stop = func() {
		if nc != nil {
			nc.Close()
		}
		if ns != nil {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	if err != nil {
		return nil, nil, nil, stop, err
	}
	ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		return nil, nil, nil, stop, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(20 * time.Second) {
		return ns, nil, nil, stop, errors.New("nats-server did not start")
	}
	if nc, err = nats.Connect(ns.ClientURL()); err != nil {
		return ns, nil, nil, stop, err
	}
	if js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192), jetstream.WithPublishAsyncTimeout(30*time.Second)); err != nil {
		return ns, nc, nil, stop, err
	}
	if _, err := natsbus.EnsureStream(ctx, js, time.Hour); err != nil {
		return ns, nc, js, stop, err
	}
	return ns, nc, js, stop, nil
}

// outboxSystem is one system under test.
type outboxSystem interface {
	// Fill commits n messages before the relay starts.
	Fill(ctx context.Context, n int) error
	// Start runs the relay/forwarder until Stop.
	Start(ctx context.Context) error
	// Publish commits k messages in one transaction and returns their ids.
	Publish(ctx context.Context, k int) ([]string, error)
	Stop()
}

func runOutbox(ctx context.Context, env *Env, system string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, env.Cfg.Timeout)
	defer cancel()
	msgs, rate, dur := env.Cfg.outboxDefaults()
	_, nc, js, stopNATS, err := startNATS(ctx)
	defer stopNATS()
	if err != nil {
		return Result{}, fmt.Errorf("nats: %w", err)
	}
	arr := &arrivals{at: map[string]time.Time{}}
	sub, err := nc.Subscribe(natsbus.SubjectPrefix+".>", func(m *nats.Msg) {
		arr.add(m.Header.Get(jetstream.MsgIDHeader), time.Now())
	})
	if err != nil {
		return Result{}, err
	}
	defer sub.Unsubscribe()      //nolint:errcheck
	sub.SetPendingLimits(-1, -1) //nolint:errcheck

	name := env.DBName("jejak_bench_outbox")
	var sys outboxSystem
	var closePools func()
	switch system {
	case "jejak":
		db, err := env.NewJejakDB(ctx, name)
		if err != nil {
			return Result{}, err
		}
		closePools = db.Close
		sys = &jejakOutbox{db: db, js: js, env: env}
	case "watermill":
		if err := env.FreshDatabase(ctx, name); err != nil {
			return Result{}, err
		}
		pcfg, err := pgxpool.ParseConfig(env.DatabaseURL(name))
		if err != nil {
			return Result{}, err
		}
		pcfg.MaxConns = env.Cfg.Conns
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return Result{}, err
		}
		closePools = pool.Close
		sys = &watermillOutbox{pool: pool, js: js, env: env}
	default:
		return Result{}, fmt.Errorf("unknown system %q", system)
	}
	defer func() {
		sys.Stop()
		closePools()
		_ = env.DropDatabase(context.WithoutCancel(ctx), name)
	}()

	// Burn-down: msgs committed rows, relayed as fast as the system can.
	if err := sys.Fill(ctx, msgs); err != nil {
		return Result{}, fmt.Errorf("fill: %w", err)
	}
	if err := env.Checkpoint(ctx); err != nil {
		return Result{}, err
	}
	arr.expect(msgs)
	start := time.Now()
	if err := sys.Start(ctx); err != nil {
		return Result{}, err
	}
	if err := arr.wait(ctx); err != nil {
		return Result{}, fmt.Errorf("burn-down: %w", err)
	}
	elapsed := time.Since(start)

	// Steady load: rate messages per second for dur, in transactions of
	// rate/100 every 10 ms; latency from each commit to its arrival.
	per := max(rate/100, 1)
	tick := time.Duration(float64(time.Second) * float64(per) / float64(rate))
	committed := map[string]time.Time{}
	t := time.NewTicker(tick)
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, ctx.Err()
		case <-t.C:
		}
		ids, err := sys.Publish(ctx, per)
		if err != nil {
			t.Stop()
			return Result{}, fmt.Errorf("steady publish: %w", err)
		}
		now := time.Now()
		for _, id := range ids {
			committed[id] = now
		}
	}
	t.Stop()
	arr.expect(msgs + len(committed))
	if err := arr.wait(ctx); err != nil {
		return Result{}, fmt.Errorf("steady load: %w", err)
	}
	var lat []float64
	arr.mu.Lock()
	for id, c := range committed {
		lat = append(lat, float64(arr.at[id].Sub(c).Microseconds())/1000)
	}
	arr.mu.Unlock()
	sort.Float64s(lat)
	return Result{Metrics: []Metric{
		{"msgs_per_sec", float64(msgs) / elapsed.Seconds()},
		{"seconds", elapsed.Seconds()},
		{"p50_ms", percentile(lat, 50)},
		{"p99_ms", percentile(lat, 99)},
		{"max_ms", lat[len(lat)-1]},
		{"steady_rate", float64(rate)},
		{"msgs", float64(msgs)},
	}}, nil
}

// jejakOutbox is Jejak's relay with its defaults (two claim loops of 1000,
// each with up to two batches out, async JetStream publish per batch).
type jejakOutbox struct {
	db     *JejakDB
	js     jetstream.JetStream
	env    *Env
	cancel context.CancelFunc
	done   chan struct{}
	w      *outbox.Writer
	next   int
}

func (j *jejakOutbox) Fill(ctx context.Context, n int) error {
	_, err := j.db.Admin.Exec(ctx, `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, created_at, available_at)
		SELECT ($1::bigint[])[1 + g % cardinality($1::bigint[])], 'project.updated', 'project', (g % 10000)::text,
		       jsonb_build_object('seq', g, 'name', 'Katalog Musim Hujan'), now(), now()
		  FROM generate_series(1, $2::int) g`, j.db.Tenants, n)
	return err
}

func (j *jejakOutbox) Start(ctx context.Context) error {
	r, err := outbox.NewRelay(outbox.RelayConfig{Pool: j.db.System, Sink: natsbus.Sink{JS: j.js}, Logger: j.env.Log,
		PollInterval: j.env.Cfg.PollInterval})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	j.cancel, j.done = cancel, make(chan struct{})
	go func() { defer close(j.done); r.Run(rctx) }()
	return nil
}

func (j *jejakOutbox) Publish(ctx context.Context, k int) ([]string, error) {
	if j.w == nil {
		j.w = outbox.NewWriter(nil)
	}
	ids := make([]string, 0, k)
	tid := j.db.Tenants[j.next%len(j.db.Tenants)]
	j.next++
	err := database.InTx(ctx, j.db.System, func(tx pgx.Tx) error {
		ids = ids[:0]
		for i := range k {
			id, err := j.w.Publish(ctx, tx, tid, outbox.Message{Type: "project.updated", AggregateType: "project",
				AggregateID: strconv.Itoa((j.next*k + i) % 10000), Payload: map[string]any{"seq": i, "name": "Katalog Musim Hujan"}})
			if err != nil {
				return err
			}
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		return nil
	})
	return ids, err
}

func (j *jejakOutbox) Stop() {
	if j.cancel != nil {
		j.cancel()
		<-j.done
		j.cancel = nil
	}
}

// watermillOutbox is watermill-sql's PostgreSQL publisher and subscriber
// (default schema, batch of 500, 20 ms poll like Jejak's) with a forwarder
// to JetStream.
type watermillOutbox struct {
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	env    *Env
	cancel context.CancelFunc
	done   chan struct{}
}

const wmTopic = "bench_events"

var wmSchema = wmsql.DefaultPostgreSQLSchema{SubscribeBatchSize: 500}

func (w *watermillOutbox) publish(ctx context.Context, db wmsql.ContextExecutor, k int, init bool) ([]string, error) {
	pub, err := wmsql.NewPublisher(db, wmsql.PublisherConfig{SchemaAdapter: wmSchema, AutoInitializeSchema: init}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	ms := make([]*message.Message, k)
	ids := make([]string, k)
	for i := range ms {
		ids[i] = watermill.NewUUID()
		ms[i] = message.NewMessage(ids[i], []byte(fmt.Sprintf(`{"seq":%d,"name":"Katalog Musim Hujan"}`, i)))
	}
	return ids, pub.Publish(wmTopic, ms...)
}

func (w *watermillOutbox) Fill(ctx context.Context, n int) error {
	db := wmsql.BeginnerFromPgx(w.pool)
	for n > 0 {
		k := min(n, 500)
		if _, err := w.publish(ctx, db, k, true); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (w *watermillOutbox) Start(ctx context.Context) error {
	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromPgx(w.pool), wmsql.SubscriberConfig{
		ConsumerGroup: "bench", SchemaAdapter: wmSchema, OffsetsAdapter: wmsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true, PollInterval: w.env.Cfg.PollInterval,
	}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	ch, err := sub.Subscribe(rctx, wmTopic)
	if err != nil {
		cancel()
		return err
	}
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		defer sub.Close() //nolint:errcheck
		for m := range ch {
			nm := nats.NewMsg(natsbus.Subject("bench", "project.updated"))
			nm.Data = m.Payload
			nm.Header.Set(jetstream.MsgIDHeader, m.UUID)
			if _, err := w.js.PublishMsg(rctx, nm); err != nil {
				m.Nack()
				continue
			}
			m.Ack()
		}
	}()
	return nil
}

func (w *watermillOutbox) Publish(ctx context.Context, k int) ([]string, error) {
	var ids []string
	err := database.InTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		ids, err = w.publish(ctx, wmsql.TxFromPgx(tx), k, false)
		return err
	})
	return ids, err
}

func (w *watermillOutbox) Stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
}
