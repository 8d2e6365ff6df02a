package incident

// ApprovalLink is where staff look at approvals closer.
const ApprovalLink = "/admin/approvals"

// approvalEntries are a trace's two-person approvals on the timeline: the
// request, and the decision once a second staff member made it.
func approvalEntries(rows []approvalRow) []Entry {
	var out []Entry
	for _, a := range rows {
		ref := text("incident.t.approval_ref", id(a.ID))
		requester := a.RequestedBy
		out = append(out, Entry{At: a.RequestedAt, Kind: KindApproval, TenantID: a.TenantID, ActorID: &requester,
			Actor: "staff", Title: text("incident.t.approval_requested", a.Action),
			Detail: []Text{ref, text("incident.t.approval_target", id(a.TargetID)), raw(a.Reason)}, Link: ApprovalLink})
		if a.DecidedAt == nil {
			continue
		}
		e := Entry{At: *a.DecidedAt, Kind: KindApproval, TenantID: a.TenantID, ActorID: a.DecidedBy, Actor: "staff",
			Title: text("incident.t.approval_decided", a.Action, Code{"approval", a.State}), Detail: []Text{ref}, Link: ApprovalLink}
		if a.DecisionReason != nil && *a.DecisionReason != "" {
			e.Detail = append(e.Detail, raw(*a.DecisionReason))
		}
		if a.JobID != nil {
			e.Detail = append(e.Detail, text("incident.t.approval_job", id(*a.JobID)))
			e.JobID = *a.JobID
		}
		out = append(out, e)
	}
	return out
}
