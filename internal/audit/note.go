package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// KeyName names the operator's log key in signed notes.
const KeyName = "jejak-audit"

// Origin is the first line of a tenant's checkpoints (C2SP
// tlog-checkpoint): it names the log, one per tenant.
func Origin(slug string) string { return "jejak/audit/" + slug }

// LogSigner signs checkpoints with the operator's Ed25519 key, as signed
// notes that golang.org/x/mod/sumdb/note verifies.
type LogSigner struct {
	signer note.Signer
	vkey   string
}

// NewLogSigner wraps priv (the anchor key) as a note signer named KeyName.
func NewLogSigner(priv ed25519.PrivateKey) (*LogSigner, error) {
	pub := priv.Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(KeyName, pub)
	if err != nil {
		return nil, err
	}
	// A note signer key is "PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖
	// seed)>", the hash being the verifier key's.
	parts := strings.Split(vkey, "+")
	skey := "PRIVATE+KEY+" + KeyName + "+" + parts[1] + "+" +
		base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, err
	}
	return &LogSigner{signer: s, vkey: vkey}, nil
}

// GenerateLogSigner is a signer with a new random key, for tests and
// benchmarks (a server keeps its key in the anchor directory).
func GenerateLogSigner() (*LogSigner, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return NewLogSigner(priv)
}

// VerifierKey is the public verifier key: <name>+<hash>+<base64 key>.
func (s *LogSigner) VerifierKey() string { return s.vkey }

// Sign returns the signed checkpoint note of a tree.
func (s *LogSigner) Sign(origin string, size int64, root []byte) (string, error) {
	b, err := note.Sign(&note.Note{Text: CheckpointText(origin, size, root)}, s.signer)
	return string(b), err
}

// CheckpointText is a checkpoint's body: origin, tree size and base64 root
// hash, one per line.
func CheckpointText(origin string, size int64, root []byte) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root) + "\n"
}

// Checkpoint is a parsed, verified checkpoint.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	Note   string
}

// errBadCheckpoint wraps everything wrong with a checkpoint.
var errBadCheckpoint = errors.New("bad checkpoint")

// OpenCheckpoint verifies a signed checkpoint note with the verifier key
// and parses it; origin, when not empty, must match.
func OpenCheckpoint(signed []byte, vkey, origin string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: verifier key: %v", errBadCheckpoint, err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", errBadCheckpoint, err)
	}
	cp, err := ParseCheckpointText(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if origin != "" && cp.Origin != origin {
		return Checkpoint{}, fmt.Errorf("%w: origin %q, want %q", errBadCheckpoint, cp.Origin, origin)
	}
	cp.Note = string(signed)
	return cp, nil
}

// ParseCheckpointText parses a checkpoint body (without checking any
// signature).
func ParseCheckpointText(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return Checkpoint{}, fmt.Errorf("%w: want origin, size and root lines", errBadCheckpoint)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: size %q", errBadCheckpoint, lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root hash %q", errBadCheckpoint, lines[2])
	}
	cp := Checkpoint{Origin: lines[0], Size: size}
	copy(cp.Root[:], root)
	return cp, nil
}

// sameRoot compares a stored root with a computed one.
func sameRoot(stored []byte, h tlog.Hash) bool { return bytes.Equal(stored, h[:]) }

// VerifierKeyOf is the note verifier key of the log key whose public half
// is pub.
func VerifierKeyOf(pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(KeyName, pub)
}
