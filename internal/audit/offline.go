package audit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/tlog"
)

// ExportSummary is what VerifyExport established about an export.
type ExportSummary struct {
	TenantID int64
	Count    int64
	TreeSize int64
	Root     tlog.Hash
	Trailer  Trailer
}

// VerifyExport checks an unfiltered JSON Lines export offline, with no
// database and only the operator's verifier key: the trailer's checkpoint
// must carry a good signature, every event's leaf is recomputed from its
// fields (detail from detail_text, byte for byte as encoded), seqs run
// from 1 without a gap, and the tree the leaves build has the root the
// checkpoint signs at its size. A filtered export cannot be checked this
// way (it has gaps).
func VerifyExport(r io.Reader, vkey string) (ExportSummary, error) {
	var sum ExportSummary
	var ct compactTree
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	sawTrailer := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if sawTrailer {
			return sum, fmt.Errorf("line %d: data after the trailer", n)
		}
		if bytes.HasPrefix(line, []byte(`{"trailer":`)) {
			var t struct {
				Trailer Trailer `json:"trailer"`
			}
			if err := json.Unmarshal(line, &t); err != nil {
				return sum, fmt.Errorf("line %d: trailer: %w", n, err)
			}
			sum.Trailer, sawTrailer = t.Trailer, true
			continue
		}
		var l jsonLine
		if err := json.Unmarshal(line, &l); err != nil {
			return sum, fmt.Errorf("line %d: %w", n, err)
		}
		if l.Seq != ct.size+1 {
			return sum, fmt.Errorf("line %d: event #%d follows #%d (a filtered or cut export)", n, l.Seq, ct.size)
		}
		if sum.TenantID != 0 && l.TenantID != sum.TenantID {
			return sum, fmt.Errorf("event #%d belongs to tenant %d, the export to %d", l.Seq, l.TenantID, sum.TenantID)
		}
		sum.TenantID = l.TenantID
		f := chainFields{TenantID: l.TenantID, Seq: l.Seq, ID: l.EventID, ActorKind: l.ActorKind, ActorID: l.ActorID,
			Action: l.Action, Entity: l.Entity, EntityID: l.EntityID, DetailText: l.DetailText,
			OccurredAt: l.OccurredAt, TraceID: l.TraceID, JobID: l.JobID}
		if l.V1PrevHash != "" {
			ph, err := hex.DecodeString(l.V1PrevHash)
			if err != nil {
				return sum, fmt.Errorf("event #%d: v1_prev_hash is not hex", l.Seq)
			}
			f.V1, f.PrevHash = true, ph
		}
		h := tlog.RecordHash(f.encode())
		if base64.StdEncoding.EncodeToString(h[:]) != l.LeafHash {
			return sum, fmt.Errorf("event #%d: its fields do not hash to its leaf hash", l.Seq)
		}
		ct.append(h)
		sum.Count++
	}
	if err := sc.Err(); err != nil {
		return sum, err
	}
	if !sawTrailer {
		return sum, fmt.Errorf("no trailer: the export was cut short")
	}
	if sum.Trailer.Count != sum.Count {
		return sum, fmt.Errorf("trailer counts %d events, the export holds %d", sum.Trailer.Count, sum.Count)
	}
	if sum.Count == 0 && sum.Trailer.Checkpoint == "" {
		return sum, nil // an empty log, nothing signed yet
	}
	cp, err := OpenCheckpoint([]byte(sum.Trailer.Checkpoint), vkey, "")
	if err != nil {
		return sum, fmt.Errorf("the export's checkpoint: %w", err)
	}
	sum.TreeSize, sum.Root = cp.Size, cp.Root
	switch {
	case cp.Size != ct.size:
		return sum, fmt.Errorf("the checkpoint signs %d events, the export holds %d", cp.Size, ct.size)
	case cp.Root != ct.root():
		return sum, fmt.Errorf("the events do not build the tree the checkpoint signs")
	}
	return sum, nil
}
