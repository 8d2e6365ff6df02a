package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/views/admin"
)

func (s *Server) adminHome(c echo.Context) error {
	return render(c, http.StatusOK, admin.HomePage())
}
