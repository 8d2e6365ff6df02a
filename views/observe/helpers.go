package observe

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

// rowTestID marks job lines apart so tests can list a trace's jobs.
func rowTestID(r IncidentRow) string {
	if r.Kind == "job" {
		return "trace-job"
	}
	return "incident-row"
}
