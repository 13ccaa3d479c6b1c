package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
)

// RunIfMax bounds a node's run_if template, in bytes.
const RunIfMax = 4096

// NodeScope is the template data a node depending on dependsOn may read:
// the workflow's inputs and its upstream nodes, direct or not (deps: each
// node's dependencies by key); event: the workflow's runs start by event,
// and may read .event….
func NodeScope(dependsOn []string, deps map[string][]string, inputs Inputs, event bool) template.Scope {
	seen := map[string]bool{}
	var up []string
	var walk func(keys []string)
	walk = func(keys []string) {
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				up = append(up, k)
				walk(deps[k])
			}
		}
	}
	walk(dependsOn)
	names := make([]string, 0, len(inputs))
	for name := range inputs {
		names = append(names, name)
	}
	return template.Scope{Workflow: true, Inputs: names, Upstream: up, Event: event}
}

// CheckTemplates checks a node's payload template (when payloadTemplate)
// and its run_if (field prefix f, nodes[i]) against the data it may read
// (scope, called only when it has one).
func CheckTemplates(ve *errs.ValidationError, f string, body []byte, payloadTemplate bool, runIf string, scope func() template.Scope) {
	if !payloadTemplate && runIf == "" {
		return
	}
	sc := scope()
	if payloadTemplate {
		payload.Check(ve, f+".payload", body, sc)
	}
	if runIf != "" {
		if len(runIf) > RunIfMax {
			ve.Add(f+".run_if", fmt.Sprintf("must be at most %d bytes", RunIfMax))
			return
		}
		doc, _ := json.Marshal(runIf)
		payload.Check(ve, f+".run_if", doc, sc)
	}
}

// RunIfVerdict reads what a node's run_if rendered (out): fire or skip;
// a reason (neither) says why the node fails instead (anything but true
// or false).
func RunIfVerdict(out []byte) (fire, skip bool, reason string) {
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return false, false, "run_if rendered no value: " + err.Error()
	}
	switch v := v.(type) {
	case bool:
		return v, !v, ""
	case string:
		switch strings.TrimSpace(v) {
		case "true":
			return true, false, ""
		case "false":
			return false, true, ""
		}
	}
	return false, false, fmt.Sprintf("run_if rendered %s: want true or false", TruncateText(string(out), 200))
}

// Zone is the zone of a workflow's stored schedule (nil: none), in which
// its runs' templates read their slot: UTC without one, or when the zone
// does not load.
func Zone(stored *string) *time.Location {
	if stored != nil {
		var s struct {
			Timezone string `json:"timezone"`
		}
		if json.Unmarshal([]byte(*stored), &s) == nil && s.Timezone != "" {
			if loc, err := schedule.LoadZone(s.Timezone); err == nil {
				return loc
			}
		}
	}
	return time.UTC
}
