package audit

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/plaintext"
)

// exportBatch is how many rows an export reads per query; rows are written
// as each batch arrives, so memory stays flat whatever the trail's size.
const exportBatch = 1000

// exportBatchTimeout bounds one batch's transaction, connection wait
// included.
const exportBatchTimeout = 15 * time.Second

// exportRows calls emit for every event of tenantID matching f, oldest
// first, flushing after each batch so an HTTP client sees progress. Each
// batch is read in its own short tenant transaction (keyset on seq) that
// ends before any row is written: a client that reads slowly holds no
// transaction and no pool connection. The export stops at the chain's last
// event when it began, so it is one consistent prefix of the chain.
func exportRows(ctx context.Context, db database.Beginner, tenantID int64, f Filter, flush func() error, emit func(*scanned) error) error {
	var after, through int64 = 0, -1
	for {
		var rows []scanned
		bctx, cancel := context.WithTimeout(ctx, exportBatchTimeout)
		err := database.InTenantTx(bctx, db, tenantID, func(tx pgx.Tx) error {
			s := newFilteredStore(tx)
			if through < 0 {
				last, err := s.lastSeq(bctx, tenantID)
				if err != nil {
					return err
				}
				through = last
			}
			var err error
			rows, err = s.scan(bctx, tenantID, f, after, through, exportBatch)
			return err
		})
		cancel()
		if err != nil {
			return wrapf(err, "read audit events of tenant %d for export", tenantID)
		}
		for i := range rows {
			if err := emit(&rows[i]); err != nil {
				return wrapf(err, "write audit export")
			}
		}
		if err := flush(); err != nil {
			return wrapf(err, "flush audit export")
		}
		if len(rows) < exportBatch {
			return nil
		}
		after = rows[len(rows)-1].Seq
	}
}

// CSVHeader is the first line of a CSV export.
var CSVHeader = []string{"tenant_id", "seq", "occurred_at", "actor_kind", "actor_id", "action",
	"entity", "entity_id", "detail", "trace_id", "job_id", "prev_hash", "hash"}

// ExportCSV streams tenantID's events matching f to w as CSV, oldest first
// (reading through db in short tenant transactions),
// with the chain hashes so the export can be checked offline. Cells that a
// spreadsheet would run as a formula are escaped (see CSVCell).
func ExportCSV(ctx context.Context, db database.Beginner, tenantID int64, f Filter, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return wrapf(err, "write audit export")
	}
	record := make([]string, len(CSVHeader))
	var count int64
	err := exportRows(ctx, db, tenantID, f,
		func() error { cw.Flush(); return cw.Error() },
		func(r *scanned) error {
			count++
			record[0] = strconv.FormatInt(r.TenantID, 10)
			record[1] = strconv.FormatInt(r.Seq, 10)
			record[2] = r.OccurredAt.UTC().Format(time.RFC3339Nano)
			record[3] = r.ActorKind
			record[4] = formatNullInt(r.ActorID)
			record[5] = r.Action
			record[6] = r.Entity
			record[7] = r.EntityID
			record[8] = r.DetailText
			record[9] = r.TraceID
			record[10] = formatNullInt(r.JobID)
			record[11] = hex.EncodeToString(r.PrevHash)
			record[12] = hex.EncodeToString(r.Hash)
			for i := range record {
				if i != 8 {
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
	t, err := exportTrailer(ctx, db, tenantID, count)
	if err != nil {
		return err
	}
	row := make([]string, len(CSVHeader))
	row[0], row[1], row[2], row[3] = "#trailer", strconv.FormatInt(t.Count, 10), strconv.FormatInt(t.HeadSeq, 10), t.HeadHash
	if err := cw.Write(row); err != nil {
		return wrapf(err, "write audit export")
	}
	cw.Flush()
	return cw.Error()
}

// Trailer ends every export: how many events it holds and the tenant's
// chain head when the export finished, so a reader can tell a complete
// export from a cut one and compare the head with a signed checkpoint.
// CSV: a row "#trailer,<count>,<head seq>,<head hash>" (padded to the
// header's width); JSON Lines: {"trailer":{...}}.
type Trailer struct {
	Count    int64  `json:"count"`
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
}

func exportTrailer(ctx context.Context, db database.Beginner, tenantID, count int64) (Trailer, error) {
	var seq int64
	var hash []byte
	err := database.InTenantTx(ctx, db, tenantID, func(tx pgx.Tx) (err error) {
		seq, hash, err = newStore(tx).head(ctx, tenantID)
		if errors.Is(err, errNoHead) {
			return nil
		}
		return err
	})
	if err != nil {
		return Trailer{}, wrapf(err, "read audit head of tenant %d for export", tenantID)
	}
	if hash == nil {
		hash = genesisHash
	}
	// The head read after the export may be past its last event (appends
	// while it streamed); it is never before it.
	return Trailer{Count: count, HeadSeq: seq, HeadHash: hex.EncodeToString(hash)}, nil
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
	OccurredAt time.Time       `json:"occurred_at"`
	ActorKind  string          `json:"actor_kind"`
	ActorID    *int64          `json:"actor_id"`
	Action     string          `json:"action"`
	Entity     string          `json:"entity"`
	EntityID   string          `json:"entity_id"`
	Detail     json.RawMessage `json:"detail"`
	TraceID    string          `json:"trace_id"`
	JobID      *int64          `json:"job_id"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`

	// DetailText is detail exactly as hashed (jsonb's text, spaces and
	// all); Detail is re-encoded compactly by the JSON encoder.
	DetailText string `json:"detail_text"`
}

// ExportJSONLines streams tenantID's events matching f to w, one JSON object
// per line, oldest first, with the chain hashes.
func ExportJSONLines(ctx context.Context, db database.Beginner, tenantID int64, f Filter, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var count int64
	err := exportRows(ctx, db, tenantID, f, bw.Flush, func(r *scanned) error {
		count++
		return enc.Encode(jsonLine{
			TenantID:   r.TenantID,
			Seq:        r.Seq,
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
			PrevHash:   hex.EncodeToString(r.PrevHash),
			Hash:       hex.EncodeToString(r.Hash),
		})
	})
	if err != nil {
		return err
	}
	t, err := exportTrailer(ctx, db, tenantID, count)
	if err != nil {
		return err
	}
	if err := enc.Encode(struct {
		Trailer Trailer `json:"trailer"`
	}{t}); err != nil {
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
