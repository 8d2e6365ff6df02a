// Package anchor keeps signed checkpoints of every tenant's audit chain
// outside the database. A superuser can truncate a chain's tail and rewind
// its head consistently, and the chain alone would still verify; a
// checkpoint written earlier, signed with a key the database never sees,
// says how long the chain was and what its hash was at that point.
//
// Checkpoints are appended, one JSON object per line, to anchors.jsonl in
// the anchor directory (JEJAK_ANCHOR_DIR), beside the Ed25519 key that
// signs them (anchor.key, created once, 0600) and its public half
// (anchor.pub). The file is only ever appended to; copy it off the machine
// (or point the directory at append-only storage) to make rewriting it as
// hard as rewriting the database.
package anchor

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// File names inside the anchor directory.
const (
	KeyFile     = "anchor.key"
	PubFile     = "anchor.pub"
	AnchorsFile = "anchors.jsonl"
)

// Checkpoint is one tenant's chain head at one moment, signed.
type Checkpoint struct {
	TenantID int64     `json:"tenant_id"`
	Slug     string    `json:"slug"`
	Seq      int64     `json:"seq"`
	Hash     string    `json:"hash"` // hex SHA-256 of event Seq (the head)
	At       time.Time `json:"at"`
	// Sig is the base64 Ed25519 signature of Message().
	Sig string `json:"sig"`
}

// Message is what the signature covers: a versioned, line-separated text
// of tenant id, sequence number, head hash and time (UTC, RFC 3339 with
// nanoseconds). The slug is a label and is not signed.
func (c Checkpoint) Message() []byte {
	return []byte("jejak-anchor-v1\n" + strconv.FormatInt(c.TenantID, 10) + "\n" +
		strconv.FormatInt(c.Seq, 10) + "\n" + strings.ToLower(c.Hash) + "\n" + c.At.UTC().Format(time.RFC3339Nano))
}

// Valid reports whether c carries a good signature by pub.
func (c Checkpoint) Valid(pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(c.Sig)
	return err == nil && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, c.Message(), sig)
}

// Store is an anchor directory opened for writing.
type Store struct {
	dir  string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	mu   sync.Mutex
}

// Open opens (creating it and its key the first time) the anchor
// directory. The key is generated once and never replaced: a missing
// anchor.pub beside an existing key is rewritten from the key.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("anchor directory: %w", err)
	}
	keyPath := filepath.Join(dir, KeyFile)
	raw, err := os.ReadFile(keyPath)
	if errors.Is(err, os.ErrNotExist) {
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		f, ferr := os.OpenFile(keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if ferr == nil {
			_, ferr = f.WriteString(hex.EncodeToString(seed) + "\n")
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		if ferr != nil && !errors.Is(ferr, os.ErrExist) {
			return nil, fmt.Errorf("create anchor key: %w", ferr)
		}
		// Created now, or by a concurrent start: read whichever won.
		raw, err = os.ReadFile(keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("read anchor key: %w", err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("anchor key %s is not a hex Ed25519 seed", keyPath)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	pubPath := filepath.Join(dir, PubFile)
	if b, err := os.ReadFile(pubPath); err != nil || strings.TrimSpace(string(b)) != hex.EncodeToString(pub) {
		if err := os.WriteFile(pubPath, []byte(hex.EncodeToString(pub)+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("write anchor public key: %w", err)
		}
	}
	return &Store{dir: dir, priv: priv, pub: pub}, nil
}

// Public is the key that verifies this store's checkpoints.
func (s *Store) Public() ed25519.PublicKey { return s.pub }

// Dir is the anchor directory.
func (s *Store) Dir() string { return s.dir }

// Append signs cps and appends them to anchors.jsonl, synced to disk
// before it returns. It fills in each checkpoint's Sig.
func (s *Store) Append(cps []Checkpoint) error {
	if len(cps) == 0 {
		return nil
	}
	var b strings.Builder
	for i := range cps {
		cps[i].At = cps[i].At.UTC()
		cps[i].Hash = strings.ToLower(cps[i].Hash)
		cps[i].Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, cps[i].Message()))
		line, err := json.Marshal(cps[i])
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, AnchorsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open anchors: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("append anchors: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync anchors: %w", err)
	}
	return f.Close()
}

// LoadPublic reads the public key of an anchor directory.
func LoadPublic(dir string) (ed25519.PublicKey, error) {
	raw, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil {
		return nil, fmt.Errorf("read anchor public key: %w", err)
	}
	pub, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s is not a hex Ed25519 public key", PubFile)
	}
	return pub, nil
}

// Latest reads every checkpoint of dir, checks each signature with pub, and
// returns the newest per tenant (the last in file order). A line with a bad
// signature is an error: the file was edited.
func Latest(dir string, pub ed25519.PublicKey) (map[int64]Checkpoint, error) {
	f, err := os.Open(filepath.Join(dir, AnchorsFile))
	if errors.Is(err, os.ErrNotExist) {
		return map[int64]Checkpoint{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLatest(f, pub)
}

func readLatest(r io.Reader, pub ed25519.PublicKey) (map[int64]Checkpoint, error) {
	out := map[int64]Checkpoint{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var c Checkpoint
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("anchors line %d: %w", n, err)
		}
		if !c.Valid(pub) {
			return nil, fmt.Errorf("anchors line %d: bad signature (the file was edited, or signed with another key)", n)
		}
		if prev, ok := out[c.TenantID]; ok && c.Seq < prev.Seq {
			return nil, fmt.Errorf("anchors line %d: tenant %d goes back from #%d to #%d", n, c.TenantID, prev.Seq, c.Seq)
		}
		out[c.TenantID] = c
	}
	return out, sc.Err()
}

// Write records the current head of every tenant whose head moved since
// its last checkpoint (all of them with force), signed, and returns how
// many it wrote. db is the system pool; the time is the database's.
func (s *Store) Write(ctx context.Context, db database.Querier, force bool) (int, error) {
	latest, err := Latest(s.dir, s.pub)
	if err != nil {
		return 0, err
	}
	return s.write(ctx, db, latest, force, 0)
}

// WriteTenant is Write for one tenant (on demand, e.g. when its owner
// downloads a checkpoint).
func (s *Store) WriteTenant(ctx context.Context, db database.Querier, tenantID int64) (int, error) {
	latest, err := Latest(s.dir, s.pub)
	if err != nil {
		return 0, err
	}
	return s.write(ctx, db, latest, false, tenantID)
}

func (s *Store) write(ctx context.Context, db database.Querier, latest map[int64]Checkpoint, force bool, only int64) (int, error) {
	rows, err := db.Query(ctx, `SELECT h.tenant_id, t.slug, h.seq, h.hash, now()
		FROM audit_heads h JOIN tenants t ON t.id = h.tenant_id
		WHERE $1::bigint = 0 OR h.tenant_id = $1 ORDER BY h.tenant_id`, only)
	if err != nil {
		return 0, fmt.Errorf("read audit heads: %w", err)
	}
	var cps []Checkpoint
	for rows.Next() {
		var c Checkpoint
		var hash []byte
		if err := rows.Scan(&c.TenantID, &c.Slug, &c.Seq, &hash, &c.At); err != nil {
			rows.Close()
			return 0, err
		}
		c.Hash = hex.EncodeToString(hash)
		if prev, ok := latest[c.TenantID]; ok && !force && prev.Seq == c.Seq && prev.Hash == c.Hash {
			continue
		}
		cps = append(cps, c)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return len(cps), s.Append(cps)
}

// LatestFor returns the newest checkpoint of one tenant.
func (s *Store) LatestFor(tenantID int64) (Checkpoint, bool, error) {
	all, err := Latest(s.dir, s.pub)
	if err != nil {
		return Checkpoint{}, false, err
	}
	c, ok := all[tenantID]
	return c, ok, nil
}

// Problem is one disagreement between the database and the anchors.
type Problem struct {
	TenantID int64
	Reason   string
}

// Check compares the database's audit chains with the latest checkpoints:
// a chain shorter than its checkpoint, or whose event at the checkpoint's
// sequence number has another hash, was rewound or rewritten; a tenant
// with events but no head, a head without its tenant, and a checkpoint of
// a tenant whose head is gone are all failures. (Each chain's own hashes
// are checked by audit.VerifyAll.)
func Check(ctx context.Context, db database.Querier, latest map[int64]Checkpoint) ([]Problem, error) {
	var out []Problem
	for _, c := range latest {
		var headSeq int64
		var eventHash []byte
		err := db.QueryRow(ctx, `SELECT h.seq, (SELECT e.hash FROM audit_events e WHERE e.tenant_id = h.tenant_id AND e.seq = $2)
			FROM audit_heads h WHERE h.tenant_id = $1`, c.TenantID, c.Seq).Scan(&headSeq, &eventHash)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out = append(out, Problem{c.TenantID, fmt.Sprintf("anchored at #%d but has no audit head", c.Seq)})
		case err != nil:
			return nil, fmt.Errorf("read head of tenant %d: %w", c.TenantID, err)
		case headSeq < c.Seq:
			out = append(out, Problem{c.TenantID, fmt.Sprintf("chain is shorter (head #%d) than its anchor #%d of %s", headSeq, c.Seq, c.At.Format(time.RFC3339))})
		case c.Seq > 0 && hex.EncodeToString(eventHash) != c.Hash:
			out = append(out, Problem{c.TenantID, fmt.Sprintf("event #%d differs from its anchor of %s", c.Seq, c.At.Format(time.RFC3339))})
		}
	}
	rows, err := db.Query(ctx, `
		SELECT t.id, 'has audit events but no audit head' FROM tenants t
		 WHERE NOT EXISTS (SELECT 1 FROM audit_heads h WHERE h.tenant_id = t.id)
		   AND EXISTS (SELECT 1 FROM audit_events e WHERE e.tenant_id = t.id)
		UNION ALL
		SELECT h.tenant_id, 'has an audit head but no tenant' FROM audit_heads h
		 WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = h.tenant_id)`)
	if err != nil {
		return nil, fmt.Errorf("check heads and tenants: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p Problem
		if err := rows.Scan(&p.TenantID, &p.Reason); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// VerifyExport checks a tenant's JSON Lines export offline against a
// signed checkpoint: the checkpoint's signature (pub is the operator's
// published anchor key), the export's own chain (audit.VerifyExport), that
// the export is of the checkpoint's tenant and reaches at least the
// checkpoint, and that its event at the checkpoint's sequence number has
// the checkpointed hash.
func VerifyExport(r io.Reader, cp Checkpoint, pub ed25519.PublicKey) error {
	if !cp.Valid(pub) {
		return errors.New("checkpoint signature does not verify with this public key")
	}
	sum, err := audit.VerifyExport(r)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if sum.TenantID != 0 && sum.TenantID != cp.TenantID {
		return fmt.Errorf("export is of tenant %d, checkpoint of tenant %d", sum.TenantID, cp.TenantID)
	}
	if sum.LastSeq < cp.Seq {
		return fmt.Errorf("export ends at #%d, before the checkpoint #%d: the chain was cut", sum.LastSeq, cp.Seq)
	}
	if cp.Seq > 0 && sum.Hashes[cp.Seq] != cp.Hash {
		return fmt.Errorf("event #%d differs from the checkpoint", cp.Seq)
	}
	return nil
}
