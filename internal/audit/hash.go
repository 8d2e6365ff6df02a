package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"time"
)

// hashVersion is the first field of every encoding, so that a future change
// of the encoding cannot be confused with this one.
const hashVersion = "jejak-audit-v1"

// genesisHash is the previous hash of a tenant's first event (and the hash
// of an empty head): 32 zero bytes.
var genesisHash = make([]byte, sha256.Size)

// chainFields are exactly the values a hash covers, in their stored form.
type chainFields struct {
	TenantID   int64
	Seq        int64
	ActorKind  string
	ActorID    *int64
	Action     string
	Entity     string
	EntityID   string
	DetailText string // jsonb's canonical text (detail::text)
	OccurredAt time.Time
	TraceID    string
	JobID      *int64
	PrevHash   []byte
}

// eventHash is SHA-256 over the canonical encoding: every field written as a
// 4-byte big-endian length followed by its bytes (integers as 8-byte
// big-endian, NULL as zero length, occurred_at as UTC microseconds since the
// Unix epoch), in the order of chainFields. Length prefixes make the encoding
// unambiguous: no two different events encode to the same bytes.
func eventHash(f *chainFields) []byte {
	h := sha256.New()
	var buf [8]byte
	writeBytes := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	writeInt := func(v int64) {
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		writeBytes(buf[:])
	}
	writeNullInt := func(v *int64) {
		if v == nil {
			writeBytes(nil)
			return
		}
		writeInt(*v)
	}
	writeString := func(s string) { writeStringTo(h, s) }

	writeString(hashVersion)
	writeInt(f.TenantID)
	writeInt(f.Seq)
	writeString(f.ActorKind)
	writeNullInt(f.ActorID)
	writeString(f.Action)
	writeString(f.Entity)
	writeString(f.EntityID)
	writeString(f.DetailText)
	writeInt(f.OccurredAt.UnixMicro())
	writeString(f.TraceID)
	writeNullInt(f.JobID)
	writeBytes(f.PrevHash)
	return h.Sum(nil)
}

func writeStringTo(h hash.Hash, s string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
