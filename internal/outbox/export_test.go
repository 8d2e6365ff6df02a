package outbox

import "time"

// SetAfterPublish installs a hook that runs after each batch is published;
// returning true abandons the batch unsettled, as a crashed relay would.
func SetAfterPublish(r *Relay, f func([]Envelope) bool) { r.afterPublish = f }

// SetWarm overrides how long each claim loop stays awake after work and how
// often it claims meanwhile (database.WarmFor, WarmPoll); a negative warmFor
// marks it asleep as soon as nothing is claimable. Call before Run.
func SetWarm(r *Relay, warmFor, warmPoll time.Duration) { r.warmFor, r.warmPoll = warmFor, warmPoll }

// Leased reports whether r holds the relay lease now (or runs unleased),
// that is whether its loops claim.
func Leased(r *Relay) bool {
	held, _ := r.lease.get()
	return held
}
