package user

import (
	"context"
	"fmt"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/queries"
)

// ErrInvalidLocale: the language is not one the dashboard speaks.
var ErrInvalidLocale = apperr.Invalid("locale", "Choose Bahasa Indonesia or English.")

// SetLocale saves the language userID reads the dashboard in; "" means
// "follow the browser".
func (s *Service) SetLocale(ctx context.Context, userID int64, locale string) error {
	var l *string
	if locale != "" {
		if !i18n.Valid(locale) {
			return ErrInvalidLocale
		}
		l = &locale
	}
	n, err := s.store.q.UserSetLocale(ctx, queries.UserSetLocaleParams{Locale: l, ID: userID})
	if err != nil {
		return fmt.Errorf("set locale of user %d: %w", userID, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
