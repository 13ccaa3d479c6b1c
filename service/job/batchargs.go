package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// A DeliverBatchArgs job is stored by River as JSON in river_job.args,
// which River indexes with GIN (jsonb_ops: one entry per key and per
// scalar value) and writes again on every change of the job's state
// (insert, fetch, completion: each a new row version, with its index
// entries). Fifty members as objects were about a hundred index entries
// and a 5 kB row, three times per batch: a sixth of the database's work at
// 5,000 deliveries a second. So the members travel as one string:
//
//	{"tenants": ["acme", …], "first": "<RFC 3339 slot>",
//	 "executions": "0.<execution id>.0 0.<execution id>.15000 1.<execution id>.-"}
//
// one member per space-separated field: the index of its tenant in
// tenants, its execution id, and its slot as microseconds after first ("-"
// without a slot: send at once). The members' endpoints (ExecutionRef.
// EndpointID) follow the same way, apart, so that a replica of the
// previous version still reads the members:
//
//	"endpoints": ["<endpoint id>", …], "member_endpoints": "0 0 1 -"
//
// each member's index in endpoints ("-": none), member_endpoints left out
// when every member's is the first (a batch to one endpoint), both when
// no member has one. SQL takes the members apart in one place, db's
// batchMembers and jobTenant (db/batchargs.go), which every statement
// that looks into a batch uses; TestBatchArgsSQLReadsWhatGoWrites holds
// them to this encoder.
type packedBatchArgs struct {
	Tenants         []string   `json:"tenants"`
	First           *time.Time `json:"first,omitempty"`
	Executions      string     `json:"executions"`
	Endpoints       []string   `json:"endpoints,omitempty"`
	MemberEndpoints string     `json:"member_endpoints,omitempty"`
}

// MarshalJSON packs the members (see packedBatchArgs).
func (a DeliverBatchArgs) MarshalJSON() ([]byte, error) {
	var p packedBatchArgs
	tenant := map[string]int{}
	var first time.Time
	for _, r := range a.Executions {
		if !r.ScheduledFor.IsZero() && (first.IsZero() || r.ScheduledFor.Before(first)) {
			first = r.ScheduledFor
		}
		if _, ok := tenant[r.TenantID]; !ok {
			tenant[r.TenantID] = len(p.Tenants)
			p.Tenants = append(p.Tenants, r.TenantID)
		}
	}
	if !first.IsZero() {
		f := first.UTC()
		p.First = &f
	}
	var b strings.Builder
	b.Grow(len(a.Executions) * 48)
	for i, r := range a.Executions {
		id, err := uuid.Parse(r.ExecutionID)
		if err != nil {
			return nil, fmt.Errorf("batch member %q: %w", r.ExecutionID, err)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(tenant[r.TenantID]))
		b.WriteByte('.')
		b.WriteString(id.String())
		b.WriteByte('.')
		if r.ScheduledFor.IsZero() {
			b.WriteByte('-')
		} else {
			b.WriteString(strconv.FormatInt(r.ScheduledFor.Sub(first).Microseconds(), 10))
		}
	}
	p.Executions = b.String()
	p.Endpoints, p.MemberEndpoints = packEndpoints(a.Executions)
	return json.Marshal(p)
}

// packEndpoints returns the members' endpoints and, unless each member's
// is the first, each member's index among them (see packedBatchArgs).
func packEndpoints(refs []ExecutionRef) ([]string, string) {
	var endpoints []string
	index := map[string]int{}
	one := true
	for _, r := range refs {
		if r.EndpointID == "" {
			one = false
			continue
		}
		if _, ok := index[r.EndpointID]; !ok {
			index[r.EndpointID] = len(endpoints)
			endpoints = append(endpoints, r.EndpointID)
		}
		one = one && index[r.EndpointID] == 0
	}
	if len(endpoints) == 0 || one {
		return endpoints, ""
	}
	var b strings.Builder
	for i, r := range refs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if r.EndpointID == "" {
			b.WriteByte('-')
		} else {
			b.WriteString(strconv.Itoa(index[r.EndpointID]))
		}
	}
	return endpoints, b.String()
}

// unpackEndpoints sets the members' endpoints from p (see packedBatchArgs).
func unpackEndpoints(p packedBatchArgs, refs []ExecutionRef) error {
	if len(p.Endpoints) == 0 {
		return nil
	}
	if p.MemberEndpoints == "" {
		for i := range refs {
			refs[i].EndpointID = p.Endpoints[0]
		}
		return nil
	}
	fields := strings.Fields(p.MemberEndpoints)
	if len(fields) != len(refs) {
		return fmt.Errorf("%w: %d member endpoints for %d members", errBadBatchArgs, len(fields), len(refs))
	}
	for i, f := range fields {
		if f == "-" {
			continue
		}
		e, err := strconv.Atoi(f)
		if err != nil || e < 0 || e >= len(p.Endpoints) {
			return fmt.Errorf("%w: member endpoint %q", errBadBatchArgs, f)
		}
		refs[i].EndpointID = p.Endpoints[e]
	}
	return nil
}

// errBadBatchArgs is what UnmarshalJSON reports for args it did not write.
var errBadBatchArgs = errors.New("malformed deliver_batch args")

// UnmarshalJSON unpacks what MarshalJSON wrote, or the array of members
// that ax wrote before (jobs queued across an upgrade).
func (a *DeliverBatchArgs) UnmarshalJSON(b []byte) error {
	var raw struct {
		Executions json.RawMessage `json:"executions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if t := bytes.TrimSpace(raw.Executions); len(t) > 0 && t[0] == '[' {
		var refs []ExecutionRef
		if err := json.Unmarshal(t, &refs); err != nil {
			return fmt.Errorf("%w: %w", errBadBatchArgs, err)
		}
		a.Executions = refs
		return nil
	}
	var p packedBatchArgs
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var first time.Time
	if p.First != nil {
		first = p.First.UTC()
	}
	var out []ExecutionRef
	for m := range strings.FieldsSeq(p.Executions) {
		idx, rest, ok1 := strings.Cut(m, ".")
		id, slot, ok2 := strings.Cut(rest, ".")
		t, err := strconv.Atoi(idx)
		if !ok1 || !ok2 || err != nil || t < 0 || t >= len(p.Tenants) {
			return fmt.Errorf("%w: member %q", errBadBatchArgs, m)
		}
		u, err := uuid.Parse(id)
		if err != nil {
			return fmt.Errorf("%w: member %q: %w", errBadBatchArgs, m, err)
		}
		r := ExecutionRef{TenantID: p.Tenants[t], ExecutionID: u.String()}
		if slot != "-" {
			us, err := strconv.ParseInt(slot, 10, 64)
			if err != nil || first.IsZero() {
				return fmt.Errorf("%w: member %q", errBadBatchArgs, m)
			}
			r.ScheduledFor = first.Add(time.Duration(us) * time.Microsecond)
		}
		out = append(out, r)
	}
	if err := unpackEndpoints(p, out); err != nil {
		return err
	}
	a.Executions = slices.Clip(out)
	return nil
}
