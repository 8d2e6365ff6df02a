package user

import (
	"context"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
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
	found, err := s.store.SetLocale(ctx, userID, l)
	if err != nil {
		return err
	}
	if !found {
		return ErrNotFound
	}
	return nil
}
