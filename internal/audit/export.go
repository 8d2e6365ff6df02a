package audit

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/plaintext"
)

// exportBatch is how many rows an export reads per query; rows are written
// as each batch arrives, so memory stays flat whatever the trail's size.
const exportBatch = 1000

// exportBatchTimeout bounds one batch's transaction, connection wait
// included.
const exportBatchTimeout = 15 * time.Second

// exportRows calls emit for every sealed event of tenantID matching f,
// in seq order, up to the tenant's latest checkpoint, flushing after each
// batch so an HTTP client sees progress, and returns that checkpoint. Each
// batch is read in its own short tenant transaction (keyset on seq) that
// ends before any row is written: a client that reads slowly holds no
// transaction and no pool connection. Cutting at the checkpoint makes an
// unfiltered export one signed prefix of the log, checkable offline;
// events not yet signed are in the next export.
func exportRows(ctx context.Context, db database.Beginner, tenantID int64, f Filter, flush func() error, emit func(*leaf) error) (SignedTree, error) {
	var after int64
	var cp SignedTree
	bctx, cancel := context.WithTimeout(ctx, exportBatchTimeout)
	err := database.InTenantTx(bctx, db, tenantID, func(tx pgx.Tx) (err error) {
		cp, err = LatestCheckpoint(bctx, tx, tenantID)
		if errors.Is(err, ErrNoCheckpoint) {
			return nil
		}
		return err
	})
	cancel()
	if err != nil {
		return cp, wrapf(err, "read checkpoint of tenant %d for export", tenantID)
	}
	for after < cp.Size {
		var rows []leaf
		bctx, cancel := context.WithTimeout(ctx, exportBatchTimeout)
		err := database.InTenantTx(bctx, db, tenantID, func(tx pgx.Tx) (err error) {
			rows, err = newStore(tx).leaves(bctx, tenantID, after, cp.Size, exportBatch)
			return err
		})
		cancel()
		if err != nil {
			return cp, wrapf(err, "read audit events of tenant %d for export", tenantID)
		}
		if len(rows) == 0 {
			break
		}
		for i := range rows {
			if rows[i].Present && f.matches(&rows[i].chainFields) {
				if err := emit(&rows[i]); err != nil {
					return cp, wrapf(err, "write audit export")
				}
			}
		}
		if err := flush(); err != nil {
			return cp, wrapf(err, "flush audit export")
		}
		after = rows[len(rows)-1].Seq
	}
	return cp, nil
}

// matches reports whether an event passes the filter.
func (f *Filter) matches(e *chainFields) bool {
	switch {
	case f.Action != "" && e.Action != f.Action,
		f.Entity != "" && e.Entity != f.Entity,
		f.EntityID != "" && e.EntityID != f.EntityID,
		f.ActorKind != "" && e.ActorKind != string(f.ActorKind),
		f.ActorID != nil && (e.ActorID == nil || *e.ActorID != *f.ActorID),
		f.TraceID != "" && e.TraceID != f.TraceID,
		f.JobID != nil && (e.JobID == nil || *e.JobID != *f.JobID),
		f.From != nil && e.OccurredAt.Before(*f.From),
		f.To != nil && !e.OccurredAt.Before(*f.To),
		f.Actions != nil && !slices.Contains(f.Actions, e.Action),
		f.Search != "" && !strings.Contains(searchText(e.DetailText), f.Search):
		return false
	}
	return true
}

// searchText is what a name search reads, as the database's
// audit_search_text computes it: every string value of the detail,
// lower-cased.
func searchText(detail string) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(" " + x)
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var v any
	if json.Unmarshal([]byte(detail), &v) == nil {
		walk(v)
	}
	return strings.ToLower(b.String())
}

// CSVHeader is the first line of a CSV export.
var CSVHeader = []string{"tenant_id", "seq", "event_id", "occurred_at", "actor_kind", "actor_id", "action",
	"entity", "entity_id", "detail", "trace_id", "job_id", "v1_prev_hash", "leaf_hash"}

// ExportCSV streams tenantID's sealed events matching f to w as CSV, in
// seq order (reading through db in short tenant transactions), with their
// leaf hashes and the checkpoint they were cut at. Cells that a
// spreadsheet would run as a formula are escaped (see CSVCell).
func ExportCSV(ctx context.Context, db database.Beginner, tenantID int64, f Filter, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return wrapf(err, "write audit export")
	}
	record := make([]string, len(CSVHeader))
	var count int64
	cp, err := exportRows(ctx, db, tenantID, f,
		func() error { cw.Flush(); return cw.Error() },
		func(r *leaf) error {
			count++
			record[0] = strconv.FormatInt(r.TenantID, 10)
			record[1] = strconv.FormatInt(r.Seq, 10)
			record[2] = strconv.FormatInt(r.EventID, 10)
			record[3] = r.OccurredAt.UTC().Format(time.RFC3339Nano)
			record[4] = r.ActorKind
			record[5] = formatNullInt(r.ActorID)
			record[6] = r.Action
			record[7] = r.Entity
			record[8] = r.EntityID
			record[9] = r.DetailText
			record[10] = r.TraceID
			record[11] = formatNullInt(r.JobID)
			record[12] = hex.EncodeToString(r.PrevHash)
			record[13] = base64.StdEncoding.EncodeToString(r.Hashes[:tlog.HashSize])
			for i := range record {
				if i != 9 {
					// detail stays byte-identical to what was hashed
					// (JSON, never a formula); other cells are shown
					// as typed, direction and control characters visible.
					record[i] = plaintext.Visible(record[i])
				}
				record[i] = CSVCell(record[i])
			}
			return cw.Write(record)
		})
	if err != nil {
		return err
	}
	t := newTrailer(count, cp)
	row := make([]string, len(CSVHeader))
	row[0], row[1], row[2], row[3], row[4] = "#trailer", strconv.FormatInt(t.Count, 10), strconv.FormatInt(t.TreeSize, 10), t.Root, t.Checkpoint
	if err := cw.Write(row); err != nil {
		return wrapf(err, "write audit export")
	}
	cw.Flush()
	return cw.Error()
}

// Trailer ends every export: how many events it holds and the signed
// checkpoint it was cut at, so a reader can tell a complete export from a
// cut one and check an unfiltered one against the checkpoint offline.
// CSV: a row "#trailer,<count>,<tree size>,<root>,<checkpoint>" (padded to
// the header's width); JSON Lines: {"trailer":{...}}.
type Trailer struct {
	Count      int64  `json:"count"`
	TreeSize   int64  `json:"tree_size"`
	Root       string `json:"root"` // base64
	Checkpoint string `json:"checkpoint"`
}

func newTrailer(count int64, cp SignedTree) Trailer {
	t := Trailer{Count: count, TreeSize: cp.Size, Checkpoint: cp.Note}
	if cp.Root != nil {
		t.Root = base64.StdEncoding.EncodeToString(cp.Root)
	}
	return t
}

// CSVCell makes a value safe to open in a spreadsheet: a cell starting with
// = + - @, a tab or a carriage return would be read as a formula, so it
// gets a leading apostrophe (the OWASP CSV-injection advice).
func CSVCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// jsonLine is one event in a JSON Lines export.
type jsonLine struct {
	TenantID   int64           `json:"tenant_id"`
	Seq        int64           `json:"seq"`
	EventID    int64           `json:"event_id"`
	OccurredAt time.Time       `json:"occurred_at"`
	ActorKind  string          `json:"actor_kind"`
	ActorID    *int64          `json:"actor_id"`
	Action     string          `json:"action"`
	Entity     string          `json:"entity"`
	EntityID   string          `json:"entity_id"`
	Detail     json.RawMessage `json:"detail"`
	TraceID    string          `json:"trace_id"`
	JobID      *int64          `json:"job_id"`
	// V1PrevHash is set for events recorded before the log (v1 entries,
	// which cover it), hex.
	V1PrevHash string `json:"v1_prev_hash,omitempty"`
	LeafHash   string `json:"leaf_hash"` // base64

	// DetailText is detail exactly as hashed (jsonb's text, spaces and
	// all); Detail is re-encoded compactly by the JSON encoder.
	DetailText string `json:"detail_text"`
}

// ExportJSONLines streams tenantID's sealed events matching f to w, one
// JSON object per line, in seq order, with their leaf hashes and the
// checkpoint they were cut at.
func ExportJSONLines(ctx context.Context, db database.Beginner, tenantID int64, f Filter, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var count int64
	cp, err := exportRows(ctx, db, tenantID, f, bw.Flush, func(r *leaf) error {
		count++
		l := jsonLine{
			TenantID:   r.TenantID,
			Seq:        r.Seq,
			EventID:    r.EventID,
			OccurredAt: r.OccurredAt.UTC(),
			ActorKind:  r.ActorKind,
			ActorID:    r.ActorID,
			Action:     r.Action,
			Entity:     r.Entity,
			EntityID:   r.EntityID,
			Detail:     json.RawMessage(r.DetailText),
			DetailText: r.DetailText,
			TraceID:    r.TraceID,
			JobID:      r.JobID,
			LeafHash:   base64.StdEncoding.EncodeToString(r.Hashes[:tlog.HashSize]),
		}
		if r.V1 {
			l.V1PrevHash = hex.EncodeToString(r.PrevHash)
		}
		return enc.Encode(l)
	})
	if err != nil {
		return err
	}
	if err := enc.Encode(struct {
		Trailer Trailer `json:"trailer"`
	}{newTrailer(count, cp)}); err != nil {
		return wrapf(err, "write audit export")
	}
	return bw.Flush()
}

func formatNullInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}
