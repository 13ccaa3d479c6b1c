package api

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// ScheduleMembersDocument is a union's members as schedule.schedules
// holds them in the API, indented: what the console's task form shows.
func ScheduleMembersDocument(members []schedule.Spec) ([]byte, error) {
	out := make([]scheduleDTO, 0, len(members))
	for _, m := range members {
		out = append(out, scheduleOut(m))
	}
	return json.MarshalIndent(out, "", "  ")
}

// DecodeScheduleMembers reads body, a JSON array of schedules as
// schedule.schedules takes them, with the REST route's own checks
// (unknown fields refused, times read as the API reads them); every
// problem is a *service.ValidationError on a field under
// schedule.schedules (schedule.schedules[1].run_at).
func DecodeScheduleMembers(body []byte) ([]schedule.Spec, error) {
	const field = "schedule.schedules"
	if !json.Valid(body) {
		return nil, &service.ValidationError{Fields: []service.FieldError{{Field: field, Message: "must be a JSON array of schedules (this is not valid JSON)"}}}
	}
	var doc struct {
		Schedules []scheduleDTO `json:"schedules"`
	}
	wrapped := append(append([]byte(`{"schedules":`), body...), '}')
	if err := decodeStrict(wrapped, &doc); err != nil {
		var (
			p  *problem
			ve *service.ValidationError
		)
		switch {
		case errors.As(err, &ve):
			out := &service.ValidationError{}
			for _, f := range ve.Fields {
				out.Add("schedule."+f.Field, f.Message)
			}
			return nil, out
		case errors.As(err, &p):
			return nil, &service.ValidationError{Fields: []service.FieldError{{Field: field, Message: "must be a JSON array of schedules: " + p.Detail}}}
		}
		return nil, err
	}
	var ve service.ValidationError
	out := make([]schedule.Spec, 0, len(doc.Schedules))
	for i, m := range doc.Schedules {
		out = append(out, m.spec(&ve, field+"["+strconv.Itoa(i)+"]"))
	}
	return out, ve.Err()
}
