package testdb

// PlanNodes lists the nodes of a plan read from EXPLAIN (FORMAT JSON) (the
// "Plan" object), node first, then each subtree in order, for tests that
// look for a scan or count what ran. A branch planned but never run has
// zero "Actual Loops" under ANALYZE, and so has everything below it.
func PlanNodes(node map[string]any) []map[string]any {
	out := []map[string]any{node}
	kids, _ := node["Plans"].([]any)
	for _, k := range kids {
		if m, ok := k.(map[string]any); ok {
			out = append(out, PlanNodes(m)...)
		}
	}
	return out
}
