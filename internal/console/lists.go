package console

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/tenant"
)

// Limits of the list filters.
const (
	maxQueueLen = 100
	maxKeyLen   = 500
	maxTraceLen = 200
)

// JobQuery is the staff job list's filter as typed; zero fields match all.
type JobQuery struct {
	State, Kind, Tenant, Queue string
	ID, Trace, Key, Payload    string
}

// jobFilter is a validated JobQuery.
type jobFilter struct {
	State          job.State
	Kind           string
	Queue          string
	TenantID       int64
	ID             int64
	TraceID        string
	IdempotencyKey string
	// PayloadContains is a JSON object the payload must contain (jsonb @>).
	PayloadContains json.RawMessage
}

// filter validates q; problems come back per form field.
func (q JobQuery) filter(names tenant.Names) (jobFilter, fieldErrs) {
	errs := fieldErrs{}
	f := jobFilter{State: job.State(q.State), Kind: q.Kind, Queue: q.Queue, TraceID: q.Trace, IdempotencyKey: q.Key}
	if q.State != "" && !job.ValidState(f.State) {
		errs.set("state", "Unknown state.")
	}
	f.TenantID = tenantFilter(names, q.Tenant, errs)
	if q.ID != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(q.ID, "#"), 10, 64)
		if err != nil || id <= 0 {
			errs.set("id", "A job id is a positive number.")
		}
		f.ID = id
	}
	kindFilter(q.Kind, errs)
	if len(q.Queue) > maxQueueLen {
		errs.set("queue", "A queue is at most %d characters.", maxQueueLen)
	}
	if len(q.Key) > maxKeyLen {
		errs.set("key", "An idempotency key is at most %d characters.", maxKeyLen)
	}
	if len(q.Trace) > maxTraceLen {
		errs.set("trace", "A trace id is at most %d characters.", maxTraceLen)
	}
	if q.Payload != "" {
		obj, msg := payloadFilter(q.Payload)
		if msg != "" {
			errs.set("payload", msg)
		}
		f.PayloadContains = obj
	}
	return f, errs
}

func tenantFilter(names tenant.Names, slug string, errs fieldErrs) int64 {
	if slug == "" {
		return 0
	}
	t, ok := names.BySlug(slug)
	if !ok {
		errs.set("tenant", "Unknown tenant.")
	}
	return t.ID
}

func kindFilter(kind string, errs fieldErrs) {
	if len(kind) > job.MaxKindLen {
		errs.set("kind", "A kind is at most %d characters.", job.MaxKindLen)
	}
}

// fieldErrs are a filter's problems per form field: each message's English
// format (its catalog key) and values, so the page shows it in the
// reader's language.
type fieldErrs map[string]apperr.Format

func (e fieldErrs) set(field, format string, args ...any) {
	e[field] = apperr.Format{Format: format, Args: args}
}

func invalid(errs fieldErrs) error {
	if len(errs) == 0 {
		return nil
	}
	return apperr.InvalidFormats(errs)
}

var payloadField = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}(\.[A-Za-z0-9_-]{1,100}){0,7}$`)

// payloadFilter turns "field=value" into the JSON object the payload must
// contain: {"field": value}. A dotted field nests ("a.b=1" is
// {"a": {"b": 1}}). The value is a number, true, false or null when it
// reads as one, a "quoted" JSON string when quoted, and a string
// otherwise. A problem comes back as the message to show.
func payloadFilter(s string) (json.RawMessage, string) {
	field, value, ok := strings.Cut(s, "=")
	field, value = strings.TrimSpace(field), strings.TrimSpace(value)
	if !ok || field == "" || value == "" {
		return nil, `Search the payload as field=value, e.g. tenant_id=1 or user.email="a@b.c".`
	}
	if !payloadField.MatchString(field) {
		return nil, "A field name has letters, digits, _ and -, with dots for nesting."
	}
	var v any
	switch {
	case value == "true", value == "false", value == "null":
		v = json.RawMessage(value)
	case strings.HasPrefix(value, `"`):
		var str string
		if err := json.Unmarshal([]byte(value), &str); err != nil {
			return nil, "The quoted value is not a valid JSON string."
		}
		v = str
	default:
		if _, err := strconv.ParseFloat(value, 64); err == nil && json.Valid([]byte(value)) {
			v = json.RawMessage(value)
		} else {
			v = value
		}
	}
	parts := strings.Split(field, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		v = map[string]any{parts[i]: v}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, "The value cannot be searched."
	}
	return raw, ""
}

// Jobs is a page of the staff job list with the tenants for its labels.
type Jobs struct {
	Tenants tenant.Names
	keyset.Page[Row]
	// SearchedFrom, when not 0, is the oldest job id this page searched:
	// its filters have no index, so it searched one window of ids below
	// the cursor, and Next continues below that window.
	SearchedFrom int64
}

// none reports whether f narrows nothing: the whole list, which has a
// statement of its own.
func (f jobFilter) none() bool {
	return f.State == "" && f.Kind == "" && f.Queue == "" && f.TenantID == 0 && f.ID == 0 && f.TraceID == "" &&
		f.IdempotencyKey == "" && len(f.PayloadContains) == 0
}

// unindexed reports whether no index narrows the filter (no tenant, no id,
// and a filter on a column without one), so a page is a bounded scan.
func (f jobFilter) unindexed() bool {
	return f.TenantID == 0 && f.ID == 0 &&
		(f.Kind != "" || f.Queue != "" || f.TraceID != "" || f.IdempotencyKey != "" || len(f.PayloadContains) > 0)
}

// Jobs returns one page of jobs matching q across tenants, newest first,
// below before (0 = the newest). A bad filter is an apperr invalid error
// with a message per field, and Tenants is still filled for the form.
func (s *Service) Jobs(ctx context.Context, q JobQuery, before int64) (Jobs, error) {
	// Without a tenant to look up, a valid filter needs no names, and an
	// indexed page needs no newest id first: the names and the page are
	// read together, in one round trip.
	if q.Tenant == "" {
		if f, errs := q.filter(nil); len(errs) == 0 && !f.unindexed() {
			var out Jobs
			err := database.ReadAll(ctx, s.system,
				func(db database.Querier) (err error) {
					out.Tenants, err = tenant.ReadNames(ctx, db)
					return err
				},
				func(db database.Querier) (err error) {
					out.Page, err = jobsPage(ctx, db, f, before, 0)
					return err
				})
			return out, err
		}
	}
	names, err := s.tenants.Names(ctx)
	if err != nil {
		return Jobs{}, err
	}
	out := Jobs{Tenants: names}
	f, errs := q.filter(names)
	if len(errs) > 0 {
		return out, invalid(errs)
	}
	var floor int64
	if f.unindexed() {
		top := before - 1
		if before == 0 {
			if top, err = newStore(s.system).maxID(ctx); err != nil {
				return out, err
			}
		}
		if floor = top - s.scanWindow + 1; floor <= 1 {
			floor = 0
		}
	}
	out.Page, err = jobsPage(ctx, s.system, f, before, floor)
	if err == nil && floor > 0 && out.Next == 0 {
		// Fewer matches than a page in this window: older ones may lie
		// below it.
		out.Next, out.SearchedFrom = floor, floor
	}
	return out, err
}

// jobsPage reads one page of the staff job list on db: f's matches below
// before, down to floor (0 = no floor).
func jobsPage(ctx context.Context, db database.Querier, f jobFilter, before, floor int64) (keyset.Page[Row], error) {
	return onePage(func(limit int) ([]Row, error) {
		if f.none() {
			return newStore(db).listAll(ctx, before, limit)
		}
		return newFilteredStore(db).list(ctx, f, before, floor, limit)
	})
}

// DeadQuery selects dead letters for the list and the bulk actions, as
// typed; zero fields match all. Flagged is "", "yes" or "no".
type DeadQuery struct {
	Kind, Class, Tenant, Flagged string
}

// deadFilter is a validated DeadQuery.
type deadFilter struct {
	Kind     string
	Class    job.Class
	TenantID int64
	Flagged  *bool
	// MaxID, when set, limits a bulk action to the jobs that existed when
	// its preview was counted, so the count shown is the most it affects.
	MaxID int64
}

func (q DeadQuery) filter(names tenant.Names) (deadFilter, fieldErrs) {
	errs := fieldErrs{}
	f := deadFilter{Kind: q.Kind, Class: job.Class(q.Class)}
	if q.Class != "" && !job.ValidClass(f.Class) {
		errs.set("class", "Unknown failure class.")
	}
	f.TenantID = tenantFilter(names, q.Tenant, errs)
	switch q.Flagged {
	case "":
	case "yes", "no":
		b := q.Flagged == "yes"
		f.Flagged = &b
	default:
		errs.set("flagged", "Choose yes or no.")
	}
	kindFilter(q.Kind, errs)
	return f, errs
}

func (f deadFilter) before(cursor int64) *int64 {
	b := cursor
	if f.MaxID > 0 && (b <= 0 || b > f.MaxID+1) {
		b = f.MaxID + 1
	}
	return idPtr(b)
}

// DeadGroup is the dead letters of one kind and failure class.
type DeadGroup struct {
	Kind    string
	Class   job.Class
	Count   int64
	Flagged int64
	LastAt  time.Time
	Example string // the newest error of the group
}

// Dead is the dead-letter page: groups by kind and class (of the tenant
// filtered on, if any), then one page of dead letters.
type Dead struct {
	Tenants tenant.Names
	Groups  []DeadGroup
	keyset.Page[Row]
}

// Dead returns the dead letters matching q, newest first, below before. A
// bad filter is an apperr invalid error per field; Tenants and Groups are
// still filled for the page.
func (s *Service) Dead(ctx context.Context, q DeadQuery, before int64) (Dead, error) {
	names, err := s.tenants.Names(ctx)
	if err != nil {
		return Dead{}, err
	}
	out := Dead{Tenants: names}
	f, errs := q.filter(names)
	if out.Groups, err = newFilteredStore(s.system).deadGroups(ctx, f.TenantID); err != nil {
		return out, err
	}
	if len(errs) > 0 {
		return out, invalid(errs)
	}
	out.Page, err = onePage(func(limit int) ([]Row, error) {
		return newFilteredStore(s.system).deadList(ctx, f, before, limit)
	})
	return out, err
}

// DeadCount is a bulk action's preview: how many dead letters match (up to
// the cap plus one) and the newest of their ids.
type DeadCount struct {
	N     int64
	MaxID int64
}

// Preview is what a bulk action over a filter would change.
type Preview struct {
	Count  int64 // at most MaxBulk
	Capped bool  // more match than one action changes
	MaxID  int64 // the newest id counted; the action stops there
	// Permanent is how many of them (at most MaxBulk) failed permanently:
	// their handlers said another run cannot help, so a retry warns.
	Permanent int64
}

// BulkPreview counts the dead letters a bulk action over q would change,
// counting at most MaxBulk+1 so a preview never scans without bound.
func (s *Service) BulkPreview(ctx context.Context, q DeadQuery) (Preview, error) {
	names, err := s.tenants.Names(ctx)
	if err != nil {
		return Preview{}, err
	}
	f, errs := q.filter(names)
	if len(errs) > 0 {
		return Preview{}, invalid(errs)
	}
	n, err := newFilteredStore(s.system).deadCount(ctx, f, MaxBulk+1)
	if err != nil {
		return Preview{}, err
	}
	p := Preview{Count: min(n.N, MaxBulk), Capped: n.N > MaxBulk, MaxID: n.MaxID}
	if p.Count > 0 && (f.Class == "" || f.Class == job.ClassPermanent) {
		f.Class = job.ClassPermanent
		perm, err := newFilteredStore(s.system).deadCount(ctx, f, MaxBulk)
		if err != nil {
			return Preview{}, err
		}
		p.Permanent = perm.N
	}
	return p, nil
}
