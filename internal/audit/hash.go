package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// The first field of every encoding names its version, so no encoding can
// be confused with another. v1 is the hash chain that events recorded
// before the log carried (they link to the previous event's hash); v2 is a
// log entry (its place is its seq, sealed into the tenant's Merkle tree).
const (
	hashVersion  = "jejak-audit-v1"
	entryVersion = "jejak-audit-v2"
)

// genesisHash is the previous hash of a v1 chain's first event: 32 zero
// bytes.
var genesisHash = make([]byte, sha256.Size)

// chainFields are exactly the values an encoding covers, in their stored
// form.
type chainFields struct {
	TenantID   int64
	Seq        int64
	ID         int64 // v2 only: the event's id
	ActorKind  string
	ActorID    *int64
	Action     string
	Entity     string
	EntityID   string
	DetailText string // jsonb's canonical text (detail::text)
	OccurredAt time.Time
	TraceID    string
	JobID      *int64
	PrevHash   []byte // v1 only
	V1         bool
}

// encode is the canonical encoding: every field written as a 4-byte
// big-endian length followed by its bytes (integers as 8-byte big-endian,
// NULL as zero length, occurred_at as UTC microseconds since the Unix
// epoch), in the order below. Length prefixes make the encoding
// unambiguous: no two different events encode to the same bytes. A v1
// event's encoding (its chain hash is the SHA-256 of it) carries the
// previous hash; a v2 entry carries the event id instead.
func (f *chainFields) encode() []byte {
	b := make([]byte, 0, 160+len(f.DetailText))
	writeBytes := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	writeString := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	writeInt := func(v int64) {
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	writeNullInt := func(v *int64) {
		if v == nil {
			writeBytes(nil)
			return
		}
		writeInt(*v)
	}
	if f.V1 {
		writeString(hashVersion)
	} else {
		writeString(entryVersion)
	}
	writeInt(f.TenantID)
	writeInt(f.Seq)
	if !f.V1 {
		writeInt(f.ID)
	}
	writeString(f.ActorKind)
	writeNullInt(f.ActorID)
	writeString(f.Action)
	writeString(f.Entity)
	writeString(f.EntityID)
	writeString(f.DetailText)
	writeInt(f.OccurredAt.UnixMicro())
	writeString(f.TraceID)
	writeNullInt(f.JobID)
	if f.V1 {
		writeBytes(f.PrevHash)
	}
	return b
}

// eventHash is a v1 event's chain hash: SHA-256 of its encoding.
func eventHash(f *chainFields) []byte {
	h := sha256.Sum256(f.encode())
	return h[:]
}
