package incident

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ApprovalLink is where staff look at approvals closer.
const ApprovalLink = "/admin/approvals"

// ApprovalSource adds a trace's two-person approvals to the timeline: the
// request, and the decision once a second staff member made it.
func ApprovalSource(ctx context.Context, tx pgx.Tx, traceID string, limit int) ([]Entry, error) {
	rows, err := newStore(tx).approvals(ctx, traceID, limit)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, a := range rows {
		ref := text("incident.t.approval_ref", id(a.id))
		requester := a.requestedBy
		out = append(out, Entry{At: a.requestedAt, Kind: KindApproval, TenantID: a.tenantID, ActorID: &requester,
			Actor: "staff", Title: text("incident.t.approval_requested", a.action),
			Detail: []Text{ref, text("incident.t.approval_target", id(a.targetID)), raw(a.reason)}, Link: ApprovalLink})
		if a.decidedAt == nil {
			continue
		}
		e := Entry{At: *a.decidedAt, Kind: KindApproval, TenantID: a.tenantID, ActorID: a.decidedBy, Actor: "staff",
			Title: text("incident.t.approval_decided", a.action, Code{"approval", a.state}), Detail: []Text{ref}, Link: ApprovalLink}
		if a.decisionReason != "" {
			e.Detail = append(e.Detail, raw(a.decisionReason))
		}
		if a.jobID != nil {
			e.Detail = append(e.Detail, text("incident.t.approval_job", id(*a.jobID)))
			e.JobID = *a.jobID
		}
		out = append(out, e)
	}
	return out, nil
}
