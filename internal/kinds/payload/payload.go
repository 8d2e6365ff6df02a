// Package payload decodes and checks the JSON payloads of Jejak's shipped
// job kinds, so every handler classifies bad input the same way: malformed
// or invalid payloads are permanent failures (retrying cannot fix them) and
// a payload naming another tenant than its job is a policy failure.
package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/job"
)

// ErrTenantMismatch means the tenant inside the payload is not the tenant
// the job row belongs to: someone built a job that would act on another
// tenant's data.
var ErrTenantMismatch = apperr.Forbidden("payload tenant_id does not match the job's tenant")

// Decode strictly unmarshals j's payload into dst (unknown fields are
// rejected, so a misspelt option cannot be silently ignored) and checks
// that its tenant_id equals j.TenantID. dst must have a `tenant_id` field.
// Errors are already classified with job.Permanent or job.Policy.
func Decode(j *job.Job, dst any) error {
	if err := strictUnmarshal(j.Payload, dst); err != nil {
		return job.Permanent(fmt.Errorf("decode %s payload: %w", j.Kind, err))
	}
	var head struct {
		TenantID *int64 `json:"tenant_id"`
	}
	if err := json.Unmarshal(j.Payload, &head); err != nil {
		return job.Permanent(fmt.Errorf("decode %s payload: %w", j.Kind, err))
	}
	if head.TenantID == nil {
		return job.Permanent(fmt.Errorf("%s payload: tenant_id is required", j.Kind))
	}
	if *head.TenantID != j.TenantID {
		return job.Policy(fmt.Errorf("%s job %d: payload tenant %d, job tenant %d: %w",
			j.Kind, j.ID, *head.TenantID, j.TenantID, ErrTenantMismatch))
	}
	return nil
}

// Invalid reports a payload that decoded but breaks a rule of its kind.
func Invalid(j *job.Job, format string, args ...any) error {
	return job.Permanent(fmt.Errorf("%s payload: %s", j.Kind, fmt.Sprintf(format, args...)))
}

func strictUnmarshal(raw []byte, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return apperr.Invalid("payload", "empty payload")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.Invalid("payload", "trailing data after the JSON object")
	}
	return nil
}
