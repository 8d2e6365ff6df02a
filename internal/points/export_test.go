package points

// Waiting is how many awards of tenantID wait for its batch in progress.
func (h *Handler) Waiting(tenantID int64) int {
	h.batch.mu.Lock()
	defer h.batch.mu.Unlock()
	return len(h.batch.waiting[tenantID])
}
