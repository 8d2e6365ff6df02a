package web

import (
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/tenant"
)

// checkpointFile is what an owner downloads: the tenant's latest signed
// checkpoint and the key that verifies it (docs/audit.md shows how to
// check an export against it offline; compare the key with the one the
// operator publishes, not only with this file).
type checkpointFile struct {
	anchor.Checkpoint
	PublicKey string `json:"public_key"`
}

// auditCheckpoint serves the latest signed checkpoint of the tenant's audit
// chain, anchoring the current head first when it moved since (so an owner
// always gets one that covers what they see).
func (s *Server) auditCheckpoint(c echo.Context) error {
	ctx := c.Request().Context()
	t, m := currentTenant(c), membership(c)
	if m.Role != tenant.RoleOwner && m.Role != tenant.RoleAdmin {
		return apperr.Forbidden("Only owners and admins can download the audit checkpoint.")
	}
	if s.Anchors == nil {
		return tenant.ErrNotFound
	}
	if _, err := s.Anchors.WriteTenant(ctx, s.System, t.ID); err != nil {
		return fmt.Errorf("anchor tenant %d: %w", t.ID, err)
	}
	cp, ok, err := s.Anchors.LatestFor(t.ID)
	if err != nil {
		return err
	}
	if !ok {
		return tenant.ErrNotFound // no audit event yet: nothing to anchor
	}
	c.Response().Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="audit-checkpoint-%s-%d.json"`, t.Slug, cp.Seq))
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, checkpointFile{Checkpoint: cp, PublicKey: hex.EncodeToString(s.Anchors.Public())})
}
