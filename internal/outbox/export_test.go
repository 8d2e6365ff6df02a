package outbox

// SetAfterPublish installs a hook that runs after each batch is published;
// returning true abandons the batch unsettled, as a crashed relay would.
func SetAfterPublish(r *Relay, f func([]Envelope) bool) { r.afterPublish = f }
