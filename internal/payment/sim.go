package payment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// Simulator is the built-in payment provider, in the spirit of
// stripe-mock: a small HTTP API over its own tables (paysim_*), with
// idempotency keys and switches that reproduce a real provider's worst
// days: decline the next charges, or commit the next charges and then
// never answer (the client times out AFTER being charged), or forget
// idempotency keys (as when a provider's key window has passed).
type Simulator struct {
	db database.Pool

	mu          sync.Mutex
	failNext    int
	timeoutNext int
	ignoreKeys  bool
	maxHang     time.Duration
}

// NewSimulator returns a simulator over the system pool.
func NewSimulator(db database.Pool) *Simulator { return &Simulator{db: db, maxHang: 30 * time.Second} }

// FailNext declines the next n charges (402).
func (s *Simulator) FailNext(n int) { s.mu.Lock(); s.failNext = n; s.mu.Unlock() }

// TimeoutAfterChargeNext makes the next n charges commit and then hang
// until the client gives up, so the caller never learns it was charged.
func (s *Simulator) TimeoutAfterChargeNext(n int) { s.mu.Lock(); s.timeoutNext = n; s.mu.Unlock() }

// IgnoreIdempotency makes charges disregard Idempotency-Key.
func (s *Simulator) IgnoreIdempotency(on bool) { s.mu.Lock(); s.ignoreKeys = on; s.mu.Unlock() }

type switches struct {
	FailNext          *int  `json:"fail_next"`
	TimeoutNext       *int  `json:"timeout_after_charge_next"`
	IgnoreIdempotency *bool `json:"ignore_idempotency"`
}

// Handler serves the provider API: POST /v1/charges, GET /v1/charges,
// POST /v1/refunds, and POST /_sim/switches to flip the switches.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.charge)
	mux.HandleFunc("GET /v1/charges", s.list)
	mux.HandleFunc("POST /v1/refunds", s.refund)
	mux.HandleFunc("POST /_sim/switches", func(w http.ResponseWriter, r *http.Request) {
		var sw switches
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&sw); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid switches"})
			return
		}
		s.mu.Lock()
		if sw.FailNext != nil {
			s.failNext = *sw.FailNext
		}
		if sw.TimeoutNext != nil {
			s.timeoutNext = *sw.TimeoutNext
		}
		if sw.IgnoreIdempotency != nil {
			s.ignoreKeys = *sw.IgnoreIdempotency
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"ok": "true"})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// idempotent runs fn once per (endpoint, key): the first call's answer is
// stored and replayed to every later call with the key. Concurrent calls
// with one key serialize on the key's row.
func (s *Simulator) idempotent(ctx context.Context, endpoint, key string, fn func(tx pgx.Tx) (int, any, error)) (int, json.RawMessage, error) {
	var status int
	var body json.RawMessage
	err := database.InTx(ctx, s.db, func(tx pgx.Tx) error {
		if key != "" {
			tag, err := tx.Exec(ctx, `INSERT INTO paysim_idempotency (key, endpoint, status, response) VALUES ($1, $2, 0, '{}')
				ON CONFLICT (key) DO NOTHING`, endpoint+":"+key, endpoint)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return tx.QueryRow(ctx, `SELECT status, response FROM paysim_idempotency WHERE key = $1`, endpoint+":"+key).Scan(&status, &body)
			}
		}
		st, v, err := fn(tx)
		if err != nil {
			return err
		}
		if body, err = json.Marshal(v); err != nil {
			return err
		}
		status = st
		if key != "" {
			_, err = tx.Exec(ctx, `UPDATE paysim_idempotency SET status = $2, response = $3 WHERE key = $1`, endpoint+":"+key, st, body)
		}
		return err
	})
	return status, body, err
}

func (s *Simulator) charge(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Amount   int64             `json:"amount"`
		Currency string            `json:"currency"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in); err != nil || in.Amount <= 0 ||
		in.Metadata["tenant"] == "" || in.Metadata["invoice"] == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "amount and metadata.tenant, metadata.invoice are required"})
		return
	}
	s.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	if s.ignoreKeys {
		key = ""
	}
	decline := s.failNext > 0
	if decline {
		s.failNext--
	}
	hang := !decline && s.timeoutNext > 0
	if hang {
		s.timeoutNext--
	}
	maxHang := s.maxHang
	s.mu.Unlock()
	if in.Currency == "" {
		in.Currency = "IDR"
	}
	status, body, err := s.idempotent(r.Context(), "charges", key, func(tx pgx.Tx) (int, any, error) {
		if decline {
			return http.StatusPaymentRequired, map[string]string{"error": "card_declined"}, nil
		}
		c := Charge{ID: newID("ch_"), Amount: in.Amount, Currency: in.Currency, Tenant: in.Metadata["tenant"], Invoice: in.Metadata["invoice"]}
		err := tx.QueryRow(r.Context(), `INSERT INTO paysim_charges (id, idempotency_key, amount, currency, tenant_ref, invoice_ref)
			VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6) RETURNING created_at`, c.ID, key, c.Amount, c.Currency, c.Tenant, c.Invoice).Scan(&c.CreatedAt)
		return http.StatusOK, c, err
	})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	if hang {
		// Charged and committed; now the answer never comes.
		select {
		case <-r.Context().Done():
		case <-time.After(maxHang):
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Simulator) list(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	rows, err := s.db.Query(r.Context(), `SELECT id, amount, currency, tenant_ref, invoice_ref, refunded, created_at
		FROM paysim_charges WHERE tenant_ref = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Charge, error) {
		var c Charge
		err := row.Scan(&c.ID, &c.Amount, &c.Currency, &c.Tenant, &c.Invoice, &c.Refunded, &c.CreatedAt)
		return c, err
	})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

var errOverRefund = errors.New("refund exceeds the unrefunded amount")

func (s *Simulator) refund(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Charge string `json:"charge"`
		Amount int64  `json:"amount"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in); err != nil || in.Charge == "" || in.Amount <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "charge and amount are required"})
		return
	}
	status, body, err := s.idempotent(r.Context(), "refunds", r.Header.Get("Idempotency-Key"), func(tx pgx.Tx) (int, any, error) {
		tag, err := tx.Exec(r.Context(), `UPDATE paysim_charges SET refunded = refunded + $2 WHERE id = $1 AND refunded + $2 <= amount`, in.Charge, in.Amount)
		if err != nil {
			return 0, nil, err
		}
		if tag.RowsAffected() == 0 {
			return http.StatusBadRequest, map[string]string{"error": errOverRefund.Error()}, nil
		}
		ref := Refund{ID: newID("re_"), Charge: in.Charge, Amount: in.Amount}
		_, err = tx.Exec(r.Context(), `INSERT INTO paysim_refunds (id, charge_id, idempotency_key, amount, reason) VALUES ($1, $2, NULLIF($3, ''), $4, $5)`,
			ref.ID, ref.Charge, r.Header.Get("Idempotency-Key"), ref.Amount, in.Reason)
		return http.StatusOK, ref, err
	})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprint(err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
