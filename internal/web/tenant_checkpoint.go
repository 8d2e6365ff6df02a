package web

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/tenant"
)

// auditCheckpoint serves the latest signed checkpoint of the tenant's audit
// chain (docs/audit.md: how to check an export against it offline).
func (s *Server) auditCheckpoint(c echo.Context) error {
	if s.Anchors == nil {
		return tenant.ErrNotFound
	}
	t := currentTenant(c)
	f, err := s.Anchors.Checkpoint(c.Request().Context(), t.ID, membership(c).Role)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="audit-checkpoint-%s-%d.json"`, t.Slug, f.Seq))
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, f)
}
