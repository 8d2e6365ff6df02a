package anchor

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/tenant"
)

// Service hands tenants their signed checkpoints.
type Service struct {
	store  *Store
	system database.Querier // jejak_system: reads the head to anchor
}

// NewService serves checkpoints from store, anchoring through system.
func NewService(store *Store, system database.Querier) *Service {
	return &Service{store: store, system: system}
}

// File is what an owner downloads: the tenant's latest signed checkpoint
// and the key that verifies it (compare the key with the one the operator
// publishes, not only with this file).
type File struct {
	Checkpoint
	PublicKey string `json:"public_key"`
}

// Checkpoint anchors the tenant's current head if it moved since its last
// checkpoint, then returns the latest checkpoint. Owners and admins only
// (role is the caller's membership role); a tenant with no audit event yet
// has nothing to anchor (not found).
func (v *Service) Checkpoint(ctx context.Context, tenantID int64, role string) (File, error) {
	if role != tenant.RoleOwner && role != tenant.RoleAdmin {
		return File{}, apperr.Forbidden("Only owners and admins can download the audit checkpoint.")
	}
	if _, err := v.store.WriteTenant(ctx, v.system, tenantID); err != nil {
		return File{}, fmt.Errorf("anchor tenant %d: %w", tenantID, err)
	}
	cp, ok, err := v.store.LatestFor(tenantID)
	if err != nil {
		return File{}, err
	}
	if !ok {
		return File{}, tenant.ErrNotFound
	}
	return File{Checkpoint: cp, PublicKey: hex.EncodeToString(v.store.Public())}, nil
}
