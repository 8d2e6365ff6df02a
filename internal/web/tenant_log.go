package web

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/tenant"
)

// The audit log's proofs (docs/audit.md): plain text and JSON that any
// RFC 6962 / C2SP implementation checks, with the operator's verifier key
// from /audit/key.

// auditKey serves the note verifier key of every tenant's checkpoints.
func (s *Server) auditKey(c echo.Context) error {
	vkey := s.Audit.VerifierKey()
	if vkey == "" {
		return tenant.ErrNotFound
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.String(http.StatusOK, vkey+"\n")
}

// auditLogCheckpoint serves the tenant's latest signed checkpoint note.
func (s *Server) auditLogCheckpoint(c echo.Context) error {
	note, err := s.Audit.Checkpoint(c.Request().Context(), currentTenant(c).ID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.String(http.StatusOK, note)
}

// auditLogProof serves the inclusion proof of one leaf in the tree of the
// latest checkpoint.
func (s *Server) auditLogProof(c echo.Context) error {
	seq, err := positiveParam(c, "seq")
	if err != nil {
		return err
	}
	p, err := s.Audit.ProveInclusion(c.Request().Context(), currentTenant(c).ID, seq)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, p.Bundle())
}

// auditLogBundle is "Prove this event": the entry, its inclusion proof
// and the checkpoint, one file that `web audit verify-proof` checks
// offline with only the verifier key.
func (s *Server) auditLogBundle(c echo.Context) error {
	seq, err := positiveParam(c, "seq")
	if err != nil {
		return err
	}
	p, err := s.Audit.ProofBundle(c.Request().Context(), currentTenant(c).ID, seq)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Disposition", `attachment; filename="audit-proof-`+currentTenant(c).Slug+`-`+strconv.FormatInt(p.Seq, 10)+`.json"`)
	return c.JSON(http.StatusOK, p)
}

// auditLogConsistency serves the consistency proof between two tree sizes.
func (s *Server) auditLogConsistency(c echo.Context) error {
	from, err := positiveParam(c, "from")
	if err != nil {
		return err
	}
	to, err := positiveParam(c, "to")
	if err != nil {
		return err
	}
	hashes, err := s.Audit.ProveConsistency(c.Request().Context(), currentTenant(c).ID, from, to)
	if err != nil {
		return err
	}
	out := make([]string, len(hashes))
	for i, h := range hashes {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, struct {
		From   int64    `json:"from"`
		To     int64    `json:"to"`
		Hashes []string `json:"hashes"`
	}{from, to, out})
}

// auditLogEntry serves a leaf's canonical encoding, byte for byte.
func (s *Server) auditLogEntry(c echo.Context) error {
	seq, err := positiveParam(c, "seq")
	if err != nil {
		return err
	}
	entry, err := s.Audit.LeafEntry(c.Request().Context(), currentTenant(c).ID, seq)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/octet-stream", entry)
}

// positiveParam reads a required positive integer query parameter.
func positiveParam(c echo.Context, name string) (int64, error) {
	raw := c.QueryParam(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, apperr.Malformed(name + " must be a positive whole number")
	}
	return n, nil
}
