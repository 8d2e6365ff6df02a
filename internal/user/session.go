package user

import (
	"context"
	"fmt"

	"github.com/jejakhq/jejak/internal/queries"
)

// TrackSession remembers that a session token belongs to userID, so that
// revoking the user's access can find and delete their sessions (the
// session data itself is opaque to SQL).
func (s *Service) TrackSession(ctx context.Context, token string, userID int64) error {
	if token == "" {
		return nil
	}
	if err := s.store.q.UserSessionTrack(ctx, queries.UserSessionTrackParams{Token: token, UserID: userID}); err != nil {
		return fmt.Errorf("track session of user %d: %w", userID, err)
	}
	return nil
}
