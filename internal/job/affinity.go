package job

// Tenant affinity. With several replicas claiming from one queue, each
// claim used to walk every tenant, so a tenant's jobs ran on every replica
// at once: the replicas' claims walked the same tenants' heads, and a
// tenant's work split four ways made four small transactions where one
// replica made one (the points ledger's batch of a tenant's awards, say),
// whose rows the four then waited for each other to release. Now each
// worker of a queue claims first from its own share of the tenants: those
// whose id modulo the number of live workers of the queue is its rank
// among them (by worker id), learnt at each heartbeat from job_workers.
// Only when its own tenants have nothing due does it claim from the
// others' (stealing), so no job waits for its tenant's worker while
// another is idle. A worker that dies leaves its tenants to the others'
// steals, which under load come only when their own tenants leave room,
// and for good one lease later (the slots are counted again without it;
// its running jobs wait that long for rescue anyway). Fairness between
// tenants holds within each worker's share, as it did across the queue.

// slot is a worker's place among the live workers of its queues: its
// tenants are those whose id modulo members is rank.
type slot struct{ members, rank int }

// all is the slot of a worker alone: every tenant.
var all = slot{members: 1}

// orAll is s, or every tenant when s is not a slot (not yet learnt).
func (s slot) orAll() slot {
	if s.members < 1 || s.rank < 0 || s.rank >= s.members {
		return all
	}
	return s
}

// setSlot records the slot the last heartbeat answered.
func (e *Engine) setSlot(s slot) {
	e.cursorMu.Lock()
	e.slot = s.orAll()
	e.cursorMu.Unlock()
}

// Slot is this worker's share of the tenants: those whose id modulo
// members is rank (1 and 0 until its first heartbeat, or with no other
// worker of its queues). The audit sealer of the replica keeps to the
// same share.
func (e *Engine) Slot() (members, rank int) {
	e.cursorMu.Lock()
	defer e.cursorMu.Unlock()
	s := e.slot.orAll()
	return s.members, s.rank
}
