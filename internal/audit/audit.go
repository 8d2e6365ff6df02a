// Package audit is Jejak's append-only, tamper-evident audit trail.
//
// Each tenant's trail is a transparency log. A writer only inserts its
// event, in the transaction of the change it describes, and takes no lock
// that the tenant's other writers take. A Sealer then takes a tenant's
// committed, unsealed events in batches, gives them the tenant's gap-free
// seq (its total order), appends them as leaves of the tenant's RFC 6962
// Merkle tree, and signs checkpoints of the tree (C2SP tlog-checkpoint
// notes). Inclusion and consistency proofs let anyone holding a
// checkpoint check that an event is in the log and that the log was only
// ever appended to. The database refuses UPDATE, DELETE and TRUNCATE on
// events, leaves and checkpoints, and row-level security keeps every
// tenant's trail to itself (docs/audit.md).
package audit

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// ActorKind says who did something.
type ActorKind string

// Actor kinds.
const (
	// ActorUser is a member of the tenant acting in it.
	ActorUser ActorKind = "user"
	// ActorStaff is a support or admin user acting on a tenant.
	ActorStaff ActorKind = "staff"
	// ActorSystem is a worker or a scheduled task: no person, no actor id.
	ActorSystem ActorKind = "system"
)

// Errors returned by this package, with their application error codes.
var (
	// ErrInvalid means the event or query was rejected before touching the
	// database; nothing was written.
	ErrInvalid = &apperr.Error{Code: apperr.CodeInvalid, Message: "invalid audit input"}
	// ErrNotFound means no such event (for this tenant).
	ErrNotFound = apperr.NotFound("audit event not found")
)

// DB is what the read functions need: a pool, a connection or a
// transaction. Tenant-facing reads run inside database.InTenantTx.
type DB = database.Querier

// TxBeginner starts transactions with options; pools and connections are
// TxBeginners. Verify uses it for one consistent snapshot.
type TxBeginner = database.TxBeginner

// Event is one fact to record.
type Event struct {
	TenantID  int64
	ActorKind ActorKind
	ActorID   *int64 // nil exactly when ActorKind is ActorSystem
	Action    string // e.g. "project.delete"
	Entity    string // e.g. "project"
	EntityID  string // the entity's id or key, as text
	// Detail must be a JSON object; nil means {}. Invalid JSON is refused
	// before the database is touched.
	Detail  json.RawMessage
	TraceID string
	JobID   *int64
}

// Recorded is an event as stored, with its place in the log.
type Recorded struct {
	Event
	// Seq is the event's place in the tenant's log (its leaf index plus
	// one), 0 while it waits for the sealer.
	Seq        int64
	ID         int64
	OccurredAt time.Time // UTC, microsecond precision (what the column stores)
	// Names read with the event by the timeline queries, for people (not
	// part of what the log seals): the acting user's display name and
	// staff role, and the name of the user the event is about (entity
	// "user"); "" when unknown or not read.
	ActorName, ActorRole, EntityUserName string
}

// Sealed reports whether the event is in the tenant's Merkle tree yet.
func (r *Recorded) Sealed() bool { return r.Seq > 0 }

// Recorder writes audit events with times from its clock.
type Recorder struct {
	clk clock.Clock
}

// NewRecorder returns a Recorder whose events take their time from clk
// (clock.Database in production: the database's now()).
func NewRecorder(clk clock.Clock) *Recorder {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Recorder{clk: clk}
}

var actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_.:-]*$`)

// MaxActionLen bounds an action's name.
const MaxActionLen = 100

// ValidAction reports whether s can name an action: lower-case, starting
// with a letter, like "project.delete", at most MaxActionLen bytes. Filters
// use it too, so a filter never asks for an action that cannot exist.
func ValidAction(s string) bool { return len(s) <= MaxActionLen && actionPattern.MatchString(s) }

// validate checks what the database would refuse, so that a bad event is
// an ErrInvalid and the caller's transaction stays usable. It returns the
// detail to send ({} for nil).
func (e *Event) validate() (json.RawMessage, error) {
	if e.TenantID <= 0 {
		return nil, fmt.Errorf("%w: tenant id must be positive", ErrInvalid)
	}
	switch e.ActorKind {
	case ActorSystem:
		if e.ActorID != nil {
			return nil, fmt.Errorf("%w: a system actor has no actor id", ErrInvalid)
		}
	case ActorUser, ActorStaff:
		if e.ActorID == nil {
			return nil, fmt.Errorf("%w: actor kind %q needs an actor id", ErrInvalid, e.ActorKind)
		}
	default:
		return nil, fmt.Errorf("%w: unknown actor kind %q", ErrInvalid, e.ActorKind)
	}
	if !ValidAction(e.Action) {
		return nil, fmt.Errorf("%w: action %q must be lower-case like \"project.delete\"", ErrInvalid, e.Action)
	}
	if e.Entity == "" || len(e.Entity) > 100 || !utf8.ValidString(e.Entity) {
		return nil, fmt.Errorf("%w: entity must be 1 to 100 bytes of text", ErrInvalid)
	}
	if len(e.EntityID) > 200 || !utf8.ValidString(e.EntityID) {
		return nil, fmt.Errorf("%w: entity id must be at most 200 bytes of text", ErrInvalid)
	}
	if len(e.TraceID) > 200 || !utf8.ValidString(e.TraceID) {
		return nil, fmt.Errorf("%w: trace id must be at most 200 bytes of text", ErrInvalid)
	}
	detail, err := validDetail(e.Detail)
	if err != nil {
		return nil, err
	}
	return detail, nil
}

// validDetail accepts a JSON object that PostgreSQL's jsonb also accepts.
func validDetail(d json.RawMessage) (json.RawMessage, error) {
	if d == nil {
		return json.RawMessage(`{}`), nil
	}
	if !json.Valid(d) {
		return nil, fmt.Errorf("%w: detail must be valid JSON, got %q", ErrInvalid, clip.Runes(string(d), 80))
	}
	if !utf8.Valid(d) {
		return nil, fmt.Errorf("%w: detail must be UTF-8", ErrInvalid)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(d, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: detail must be a JSON object", ErrInvalid)
	}
	// jsonb cannot store the NUL character.
	if containsNULEscape(d) {
		return nil, fmt.Errorf("%w: detail must not contain \\u0000", ErrInvalid)
	}
	return d, nil
}

func containsNULEscape(d []byte) bool {
	for i := 0; i < len(d); i++ {
		if d[i] != '\\' {
			continue
		}
		if i+6 <= len(d) && string(d[i+1:i+6]) == "u0000" {
			return true
		}
		i++ // skip the escaped character, so "\\u0000" is literal text
	}
	return false
}
