package user

import (
	"context"
	"fmt"
)

// Names returns the display names of the users with the given ids in one
// query; ids without a user are absent from the map.
func (s *Store) Names(ctx context.Context, ids []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.UserNameList(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list names of %d users: %w", len(ids), err)
	}
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// Names returns the display names of the users with the given ids (one
// query, for naming the actors of a whole page).
func (s *Service) Names(ctx context.Context, ids []int64) (map[int64]string, error) {
	return s.store.Names(ctx, ids)
}

// ByEmail returns the user with that e-mail (normalised), or ErrNotFound.
func (s *Service) ByEmail(ctx context.Context, email string) (*User, error) {
	return s.store.GetByEmail(ctx, NormalizeEmail(email))
}
