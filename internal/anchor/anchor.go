// Package anchor keeps signed checkpoints of every tenant's audit log
// outside the database. A superuser can truncate a log's tail and rewind
// its tree, and the database alone would still look whole; a checkpoint
// written earlier, signed with a key the database never sees, says how
// large the tree was and what its root was at that point.
//
// The sealer appends every checkpoint it signs (a C2SP tlog-checkpoint
// signed note), one JSON object per line, to anchors.jsonl in the anchor
// directory (JEJAK_ANCHOR_DIR), beside the Ed25519 key that signs them
// (anchor.key, created once, 0600) and its public half (anchor.pub).
// Appending never reads the file. Lines written before the log (v1: a
// chain head's seq and hash, signed with the same key) stay checkable. The
// file is only ever appended to; copy it off the machine (or point the
// directory at append-only storage) to make rewriting it as hard as
// rewriting the database.
package anchor

import (
	"bufio"
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

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/keyfile"
)

// File names inside the anchor directory.
const (
	KeyFile     = "anchor.key"
	PubFile     = "anchor.pub"
	AnchorsFile = "anchors.jsonl"
)

// line is one line of anchors.jsonl: a v2 checkpoint (Note set) or a v1
// chain head (Seq, Hash, At, Sig).
type line struct {
	TenantID int64  `json:"tenant_id"`
	Slug     string `json:"slug"`
	Size     int64  `json:"size,omitempty"`
	Root     string `json:"root,omitempty"` // base64
	Note     string `json:"note,omitempty"`

	Seq  int64     `json:"seq,omitempty"`
	Hash string    `json:"hash,omitempty"` // hex
	At   time.Time `json:"at,omitzero"`
	Sig  string    `json:"sig,omitempty"`
}

// v1Message is what a v1 line's signature covers: a versioned,
// line-separated text of tenant id, sequence number, head hash and time
// (UTC, RFC 3339 with nanoseconds).
func (l *line) v1Message() []byte {
	return []byte("jejak-anchor-v1\n" + strconv.FormatInt(l.TenantID, 10) + "\n" +
		strconv.FormatInt(l.Seq, 10) + "\n" + strings.ToLower(l.Hash) + "\n" + l.At.UTC().Format(time.RFC3339Nano))
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
func Open(dir string) (*Store, error) { return open(dir, nil) }

// OpenWithKey is Open, with seed (an Ed25519 seed) as the key when the
// directory has none yet: a benchmark's database signed with a fixed key
// is served by a server holding that key. A directory holding another key
// is an error.
func OpenWithKey(dir string, seed []byte) (*Store, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("anchor key: want a %d-byte Ed25519 seed, got %d bytes", ed25519.SeedSize, len(seed))
	}
	s, err := open(dir, seed)
	if err != nil {
		return nil, err
	}
	if !s.priv.Equal(ed25519.NewKeyFromSeed(seed)) {
		return nil, fmt.Errorf("anchor directory %s holds another key", dir)
	}
	return s, nil
}

// open opens dir, creating its key from seed when it has none (a random
// one when seed is nil).
func open(dir string, seed []byte) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("anchor directory: %w", err)
	}
	keyPath := filepath.Join(dir, KeyFile)
	// Created now, or by a replica starting beside this one: what the file
	// holds.
	raw, err := keyfile.Read(keyPath, func() ([]byte, error) {
		if seed == nil {
			seed = make([]byte, ed25519.SeedSize)
			if _, err := rand.Read(seed); err != nil {
				return nil, err
			}
		}
		return []byte(hex.EncodeToString(seed) + "\n"), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read anchor key: %w", err)
	}
	stored, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(stored) != ed25519.SeedSize {
		return nil, fmt.Errorf("anchor key %s is not a hex Ed25519 seed", keyPath)
	}
	priv := ed25519.NewKeyFromSeed(stored)
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

// Signer is the log signer over this store's key.
func (s *Store) Signer() (*audit.LogSigner, error) { return audit.NewLogSigner(s.priv) }

// Dir is the anchor directory.
func (s *Store) Dir() string { return s.dir }

// AppendCheckpoints appends cps to anchors.jsonl, synced to disk before it
// returns (audit.CheckpointSink). It only appends: the file is never read
// to write it.
func (s *Store) AppendCheckpoints(cps []audit.SignedCheckpoint) error {
	if len(cps) == 0 {
		return nil
	}
	var b strings.Builder
	for _, c := range cps {
		l, err := json.Marshal(line{TenantID: c.TenantID, Slug: c.Slug, Size: c.Size,
			Root: base64.StdEncoding.EncodeToString(c.Root), Note: c.Note})
		if err != nil {
			return err
		}
		b.Write(l)
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

// Points reads every line of dir's anchors, checks each signature (v2
// notes with the log's verifier key over pub, v1 lines with pub itself)
// and returns each tenant's anchored states in file order. A bad
// signature, or a tenant whose tree goes back to a smaller size, is an
// error: the file was edited, or someone was shown two logs.
func Points(dir string, pub ed25519.PublicKey) (map[int64][]audit.AnchorPoint, error) {
	f, err := os.Open(filepath.Join(dir, AnchorsFile))
	if errors.Is(err, os.ErrNotExist) {
		return map[int64][]audit.AnchorPoint{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readPoints(f, pub)
}

func readPoints(r io.Reader, pub ed25519.PublicKey) (map[int64][]audit.AnchorPoint, error) {
	vkey, err := audit.VerifierKeyOf(pub)
	if err != nil {
		return nil, err
	}
	out := map[int64][]audit.AnchorPoint{}
	largest := map[int64]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("anchors line %d: %w", n, err)
		}
		var p audit.AnchorPoint
		size := l.Seq
		if l.Note != "" {
			cp, err := audit.OpenCheckpoint([]byte(l.Note), vkey, audit.Origin(l.Slug))
			if err != nil {
				return nil, fmt.Errorf("anchors line %d: %w (the file was edited, or signed with another key)", n, err)
			}
			p = audit.AnchorPoint{Size: cp.Size, Root: cp.Root[:]}
			size = cp.Size
		} else {
			sig, err := base64.StdEncoding.DecodeString(l.Sig)
			hash, herr := hex.DecodeString(l.Hash)
			if err != nil || herr != nil || !ed25519.Verify(pub, l.v1Message(), sig) {
				return nil, fmt.Errorf("anchors line %d: bad signature (the file was edited, or signed with another key)", n)
			}
			p = audit.AnchorPoint{V1Seq: l.Seq, V1Hash: hash}
		}
		if size < largest[l.TenantID] {
			return nil, fmt.Errorf("anchors line %d: tenant %d goes back from %d to %d events", n, l.TenantID, largest[l.TenantID], size)
		}
		largest[l.TenantID] = size
		if p.V1Seq > 0 || p.Size > 0 {
			out[l.TenantID] = append(out[l.TenantID], p)
		}
	}
	return out, sc.Err()
}
