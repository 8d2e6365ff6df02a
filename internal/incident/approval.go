package incident

import (
	"context"
	"strconv"

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
		ref := "approval #" + strconv.FormatInt(a.id, 10)
		requester := a.requestedBy
		out = append(out, Entry{At: a.requestedAt, Kind: KindApproval, TenantID: a.tenantID, ActorID: &requester,
			Actor: "staff", Title: a.action + " approval requested",
			Detail: ref + " · target " + strconv.FormatInt(a.targetID, 10) + " · " + a.reason, Link: ApprovalLink})
		if a.decidedAt == nil {
			continue
		}
		e := Entry{At: *a.decidedAt, Kind: KindApproval, TenantID: a.tenantID, ActorID: a.decidedBy, Actor: "staff",
			Title: a.action + " " + a.state, Detail: ref, Link: ApprovalLink}
		if a.decisionReason != "" {
			e.Detail += " · " + a.decisionReason
		}
		if a.jobID != nil {
			e.Detail += " · enqueued job " + strconv.FormatInt(*a.jobID, 10)
			e.JobID = *a.jobID
		}
		out = append(out, e)
	}
	return out, nil
}
