package audit

import (
	"encoding/json"
	"testing"
)

// TestNewestPagesStayWithinTheirBounds: a page too large is not kept, the
// pages kept never hold more than newestPagesBytes however many tenants
// read, and a tenant's page read again replaces its last one in the count.
func TestNewestPagesStayWithinTheirBounds(t *testing.T) {
	t.Parallel()
	c := newNewestPages()
	now := c.now()
	page := func(detail int) Page {
		return Page{Rows: []Recorded{{Event: Event{Detail: make(json.RawMessage, detail)}}}}
	}
	v := timelineVersion{size: 1}
	c.put(1, v, 50, now, page(newestPagesBytes/64+1))
	if _, ok := c.kept(1, 50); ok {
		t.Fatal("an oversized page was kept")
	}
	for i := int64(1); i <= 300; i++ {
		c.put(i, v, 50, now, page(newestPagesBytes/100))
		if c.bytes > newestPagesBytes {
			t.Fatalf("after %d tenants the pages hold %d bytes, over %d", i, c.bytes, newestPagesBytes)
		}
		if p, ok := c.kept(i, 50); !ok || p.ver != v {
			t.Fatalf("tenant %d's page, just put, is not kept", i)
		}
	}
	before := c.bytes
	c.put(300, v, 50, now, page(newestPagesBytes/100))
	if c.bytes != before {
		t.Fatalf("a page put again counts %d bytes, was %d", c.bytes, before)
	}
}
