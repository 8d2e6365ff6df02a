package user

import (
	"context"
	"fmt"

	"github.com/jejakhq/jejak/internal/queries"
)

// TrackSession indexes a session token by its user.
func (s *Store) TrackSession(ctx context.Context, token string, userID int64) error {
	if err := s.q.UserSessionTrack(ctx, queries.UserSessionTrackParams{Token: token, UserID: userID}); err != nil {
		return fmt.Errorf("track session of user %d: %w", userID, err)
	}
	return nil
}
