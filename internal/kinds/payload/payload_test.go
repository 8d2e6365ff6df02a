package payload_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds/payload"
)

type p struct {
	TenantID int64  `json:"tenant_id"`
	Note     string `json:"note"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw   string
		class job.Class // "" = accepted
	}{
		{`{"tenant_id":7,"note":"x"}`, ""},
		{` {"tenant_id":7} `, ""},
		{`{"tenant_id":8}`, job.ClassPolicy},
		{`{"note":"x"}`, job.ClassPermanent},
		{`{"tenant_id":null}`, job.ClassPermanent},
		{`{"tenant_id":7,"extra":1}`, job.ClassPermanent},
		{`{"tenant_id":7}{"tenant_id":7}`, job.ClassPermanent},
		{`{"tenant_id":7.5}`, job.ClassPermanent},
		{`null`, job.ClassPermanent},
		{``, job.ClassPermanent},
	}
	for _, c := range cases {
		var dst p
		err := payload.Decode(&job.Job{ID: 1, TenantID: 7, Kind: "test.kind", Payload: json.RawMessage(c.raw)}, &dst)
		switch {
		case c.class == "" && err != nil:
			t.Errorf("%s: %v", c.raw, err)
		case c.class != "" && err == nil:
			t.Errorf("%s: accepted", c.raw)
		case c.class != "" && job.ClassOf(err) != c.class:
			t.Errorf("%s: class %s, want %s", c.raw, job.ClassOf(err), c.class)
		}
		if c.class == job.ClassPolicy && !errors.Is(err, payload.ErrTenantMismatch) {
			t.Errorf("%s: %v, want ErrTenantMismatch", c.raw, err)
		}
	}
}
