// Package union keeps a union schedule as a task stores it: whole, as
// JSON, in tasks.schedule_union, with every calendar it names in the
// task's exclude_calendars column.
package union

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/schedule"
)

// A union schedule is stored whole in tasks.schedule_union, as JSON; its
// exclude_calendars column holds every calendar the union or a member
// names (CalendarIDs), so that the calendars' in-use check and
// their changes find the task as they find any other.

// SetColumns stores in.Schedule, a union, in r: the whole spec
// (normalised, calendar ids in their stored form) in ScheduleUnion, every
// calendar it names in ExcludeCalendars, and no cron, interval or zone of
// its own.
func SetColumns(r *db.Task, spec schedule.Spec) {
	spec = schedule.Normalize(spec)
	spec.ExcludeCalendars = lowerIDs(spec.ExcludeCalendars)
	for i := range spec.Schedules {
		spec.Schedules[i].ExcludeCalendars = lowerIDs(spec.Schedules[i].ExcludeCalendars)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic("encode a union schedule: " + err.Error()) // a Spec always encodes
	}
	doc := string(b)
	r.ScheduleUnion, r.Cron, r.IntervalSeconds, r.Timezone = &doc, nil, nil, spec.Timezone
	r.ExcludeCalendars = CalendarIDs(spec)
}

// Spec reads a stored union schedule back (ok false when doc is not
// one: the row is then read as the columns say).
func Spec(doc *string) (schedule.Spec, bool) {
	if doc == nil {
		return schedule.Spec{}, false
	}
	var spec schedule.Spec
	if err := json.Unmarshal([]byte(*doc), &spec); err != nil || spec.Type != schedule.Union {
		return schedule.Spec{}, false
	}
	return spec, true
}

// CalendarIDs returns every calendar id spec names, its own and
// its members', each once, in their stored (lower-case) form.
func CalendarIDs(spec schedule.Spec) []string {
	ids := lowerIDs(spec.ExcludeCalendars)
	for _, m := range spec.Schedules {
		for _, id := range lowerIDs(m.ExcludeCalendars) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func lowerIDs(ids []string) []string {
	if ids == nil {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.ToLower(id)
	}
	return out
}

// CalendarFields renames the fields of err, calendar.Load's
// refusal of ids (schedule.exclude_calendars[i], i in ids), to where a
// union names each calendar: schedule.exclude_calendars[j] or
// schedule.schedules[k].exclude_calendars[j]. Any other error is
// returned as it is.
func CalendarFields(err error, spec schedule.Spec, ids []string) error {
	ve, ok := err.(*errs.ValidationError) // calendar.Load returns it unwrapped
	if !ok || spec.Type != schedule.Union {
		return err
	}
	var out errs.ValidationError
	for _, f := range ve.Fields {
		var i int
		if _, scanErr := fmt.Sscanf(f.Field, "schedule.exclude_calendars[%d]", &i); scanErr != nil || i < 0 || i >= len(ids) {
			out.Fields = append(out.Fields, f)
			continue
		}
		for j, id := range spec.ExcludeCalendars {
			if strings.EqualFold(id, ids[i]) {
				out.Add(fmt.Sprintf("schedule.exclude_calendars[%d]", j), f.Message)
			}
		}
		for k, m := range spec.Schedules {
			for j, id := range m.ExcludeCalendars {
				if strings.EqualFold(id, ids[i]) {
					out.Add(fmt.Sprintf("schedule.schedules[%d].exclude_calendars[%d]", k, j), f.Message)
				}
			}
		}
	}
	return &out
}
