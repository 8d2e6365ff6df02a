// Package witness checks a tenant's audit log from outside the operator:
// run on another machine (the tenant's or an auditor's), each Run fetches
// the tenant's latest signed checkpoint, proves with an RFC 6962
// consistency proof that it extends the last checkpoint this witness
// accepted, and only then accepts it. A log rewound, rewritten or shown
// differently to different readers (a split view) fails the run and
// leaves the accepted checkpoint in place, so every later run fails too
// until someone looks. The signatures and proofs are checked with
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog.
package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/audit"
)

// The failures a witness exists to catch. Each Run error that is one of
// them says what was seen; anything else is a transport or usage error.
var (
	// ErrNotAppendOnly: the log is not an extension of what was accepted
	// before (rewound to a smaller tree, or a tree that does not extend
	// the accepted one).
	ErrNotAppendOnly = errors.New("the audit log was rewritten")
	// ErrSplitView: two signed checkpoints of one size with different
	// roots, proof that the operator shows different logs.
	ErrSplitView = errors.New("split view")
	// ErrBadSignature: a checkpoint not signed by the pinned key, or not
	// a checkpoint of this tenant's log.
	ErrBadSignature = errors.New("bad checkpoint")
	// ErrKeyChanged: the operator now publishes another verifier key.
	ErrKeyChanged = errors.New("the operator's verifier key changed")
)

// State files in the state directory.
const (
	keyFile        = "key"        // the verifier key pinned on the first run
	checkpointFile = "checkpoint" // the last accepted signed checkpoint
)

// bodyLimit bounds every answer read: a checkpoint is a few hundred
// bytes, a consistency proof of a 2^63-leaf tree 63 hashes.
const bodyLimit = 64 << 10

// Options say which log to witness and where the witness keeps its state.
type Options struct {
	BaseURL  string // the dashboard, e.g. https://jejak.example.com
	Slug     string // the tenant
	StateDir string // the witness's own directory (created 0700)
	Token    string // a read-only audit token of the tenant (jat_…)
	// Key pins the operator's verifier key; "" pins what /audit/key
	// publishes on the first run (and checks it on every later run).
	Key    string
	Client *http.Client // nil = a client with a 30 s timeout
}

// Result is one accepted checkpoint.
type Result struct {
	Origin   string
	Size     int64
	Root     tlog.Hash
	PrevSize int64 // the size accepted before (0 on the first run)
	First    bool  // no checkpoint was accepted before
	// Evidence names the file a failed run saved both notes in ("" when
	// the run succeeded).
	Evidence string
}

// Run witnesses the log once: see the package comment. On success the new
// checkpoint is stored in StateDir; on failure nothing there changes but
// an evidence file beside it.
func Run(ctx context.Context, o Options) (Result, error) {
	base, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return Result{}, fmt.Errorf("--url must be the dashboard's http:// or https:// address, got %q", o.BaseURL)
	}
	if o.Slug == "" || strings.ContainsAny(o.Slug, "/?#% ") {
		return Result{}, fmt.Errorf("--slug must be the tenant's slug, got %q", o.Slug)
	}
	if !audit.ValidToken(o.Token) {
		return Result{}, fmt.Errorf("the audit token must be %s followed by 43 characters (create one on the tenant's trail page)", audit.TokenPrefix)
	}
	if o.StateDir == "" {
		return Result{}, errors.New("--state must name the witness's directory")
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return Result{}, fmt.Errorf("state directory: %w", err)
	}
	c := &client{base: base.String(), slug: o.Slug, token: o.Token, http: o.Client}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}

	vkey, err := pinKey(ctx, c, o.StateDir, o.Key)
	if err != nil {
		return Result{}, err
	}
	origin := audit.Origin(o.Slug)
	raw, err := c.get(ctx, "/t/"+o.Slug+"/audit/log/checkpoint", true)
	if err != nil {
		return Result{}, err
	}
	cur, err := openCheckpoint(raw, vkey, origin)
	if err != nil {
		return Result{}, err
	}
	res := Result{Origin: origin, Size: cur.Size, Root: cur.Root}

	prevRaw, err := os.ReadFile(filepath.Join(o.StateDir, checkpointFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		res.First = true
	case err != nil:
		return Result{}, fmt.Errorf("read the accepted checkpoint: %w", err)
	}
	if !res.First {
		prev, err := openCheckpoint(prevRaw, vkey, origin)
		if err != nil {
			return Result{}, fmt.Errorf("the accepted checkpoint in %s: %w", o.StateDir, err)
		}
		res.PrevSize = prev.Size
		if err := extends(ctx, c, prev, cur); err != nil {
			res.Evidence = saveEvidence(o.StateDir, prevRaw, raw, err)
			return res, err
		}
	}
	if err := writeAtomic(filepath.Join(o.StateDir, checkpointFile), raw); err != nil {
		return Result{}, fmt.Errorf("store the accepted checkpoint: %w", err)
	}
	return res, nil
}

// openCheckpoint verifies a signed checkpoint note (note.Open under vkey)
// and reads its C2SP tlog-checkpoint body, which must name origin.
func openCheckpoint(signed []byte, vkey, origin string) (audit.Checkpoint, error) {
	cp, err := audit.OpenCheckpoint(signed, vkey, origin)
	if err != nil {
		return audit.Checkpoint{}, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return cp, nil
}

// extends checks that cur extends prev: the same tree when the sizes are
// equal, else an RFC 6962 consistency proof from the server.
func extends(ctx context.Context, c *client, prev, cur audit.Checkpoint) error {
	switch {
	case cur.Size < prev.Size:
		return fmt.Errorf("%w: the log now has %d events, fewer than the %d this witness accepted (rewound)", ErrNotAppendOnly, cur.Size, prev.Size)
	case cur.Size == prev.Size:
		if cur.Root != prev.Root {
			return fmt.Errorf("%w: two checkpoints of %d events with different roots (%s, accepted before, and %s)", ErrSplitView, cur.Size, prev.Root, cur.Root)
		}
		return nil
	case prev.Size == 0:
		// Every tree extends the empty one.
		return nil
	}
	raw, err := c.get(ctx, fmt.Sprintf("/t/%s/audit/log/consistency?from=%d&to=%d", c.slug, prev.Size, cur.Size), true)
	if err != nil {
		return fmt.Errorf("%w: the server did not prove that its %d events extend the %d accepted: %v", ErrNotAppendOnly, cur.Size, prev.Size, err)
	}
	var body struct {
		From, To int64
		Hashes   []string
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.From != prev.Size || body.To != cur.Size {
		return fmt.Errorf("%w: the consistency proof from %d to %d is malformed", ErrNotAppendOnly, prev.Size, cur.Size)
	}
	proof := make(tlog.TreeProof, len(body.Hashes))
	for i, h := range body.Hashes {
		b, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(b) != tlog.HashSize {
			return fmt.Errorf("%w: the consistency proof's hash %d is not a base64 SHA-256", ErrNotAppendOnly, i)
		}
		copy(proof[i][:], b)
	}
	if err := tlog.CheckTree(proof, cur.Size, cur.Root, prev.Size, prev.Root); err != nil {
		return fmt.Errorf("%w: the checkpoint of %d events does not extend the one of %d this witness accepted (%v)", ErrNotAppendOnly, cur.Size, prev.Size, err)
	}
	return nil
}

// pinKey returns the verifier key to check with: the one pinned in dir
// (or given), which /audit/key must still publish; on the first run the
// published (or given) key is pinned.
func pinKey(ctx context.Context, c *client, dir, given string) (string, error) {
	raw, err := c.get(ctx, "/audit/key", false)
	if err != nil {
		return "", err
	}
	published := strings.TrimSpace(string(raw))
	if _, err := note.NewVerifier(published); err != nil {
		return "", fmt.Errorf("/audit/key is not a note verifier key: %v", err)
	}
	pinned, err := os.ReadFile(filepath.Join(dir, keyFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		key := published
		if given != "" {
			key = strings.TrimSpace(given)
		}
		if key != published {
			return "", fmt.Errorf("%w: --key is %s but the server publishes %s", ErrKeyChanged, key, published)
		}
		if err := writeAtomic(filepath.Join(dir, keyFile), []byte(key+"\n")); err != nil {
			return "", fmt.Errorf("pin the verifier key: %w", err)
		}
		return key, nil
	case err != nil:
		return "", fmt.Errorf("read the pinned key: %w", err)
	}
	key := strings.TrimSpace(string(pinned))
	if given != "" && strings.TrimSpace(given) != key {
		return "", fmt.Errorf("--key differs from the key pinned in %s", dir)
	}
	if key != published {
		return "", fmt.Errorf("%w: pinned %s, the server now publishes %s; a witness does not follow a new key by itself: confirm it with the operator, then remove %s",
			ErrKeyChanged, key, published, filepath.Join(dir, keyFile))
	}
	return key, nil
}

// saveEvidence keeps both checkpoints of a failed run, signed, for
// whoever investigates; it returns the file's path ("" if it could not be
// written).
func saveEvidence(dir string, accepted, seen []byte, why error) string {
	path := filepath.Join(dir, "evidence-"+time.Now().UTC().Format("20060102T150405Z")+".txt")
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\n-- accepted before --\n%s\n-- served now --\n%s", why, accepted, seen)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return ""
	}
	return path
}

// writeAtomic replaces path with data: a crash leaves the old or the new
// file, never half of one.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// client reads the dashboard's log endpoints with the token.
type client struct {
	base, slug, token string
	http              *http.Client
}

// get fetches path; authed sends the token. A non-200 answer is an error
// that says what the status means for a witness.
func (c *client) get(ctx context.Context, path string, authed bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if authed {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, bodyLimit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(body) > bodyLimit {
		return nil, fmt.Errorf("GET %s: the answer is larger than %d bytes", path, bodyLimit)
	}
	switch res.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("GET %s: 401: the audit token was revoked; an owner creates a new one on the trail page", path)
	case http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: 404: no tenant %q with this audit token (a wrong slug, or another tenant's token)", path, c.slug)
	default:
		return nil, fmt.Errorf("GET %s: HTTP %d", path, res.StatusCode)
	}
}
