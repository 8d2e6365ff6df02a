package user

import "context"

// TrackSession remembers that a session token belongs to userID, so that
// revoking the user's access can find and delete their sessions (the
// session data itself is opaque to SQL).
func (s *Service) TrackSession(ctx context.Context, token string, userID int64) error {
	if token == "" {
		return nil
	}
	return s.store.TrackSession(ctx, token, userID)
}
