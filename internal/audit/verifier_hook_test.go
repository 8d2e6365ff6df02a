package audit

// SetVerifierWalking sets the hook v calls with the tenant's verification
// lock held, just before the chain walk.
func SetVerifierWalking(v *Verifier, f func(tenantID int64)) { v.walking = f }
