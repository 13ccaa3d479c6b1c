package api

import (
	"encoding/json"
	"errors"

	"github.com/axhq/ax/service"
)

// WorkflowDocument is the JSON body POST /v1/workflows takes for in,
// indented: what the console's workflow editor shows.
func WorkflowDocument(in service.WorkflowInput) ([]byte, error) {
	return json.MarshalIndent(workflowRequestOf(in), "", "  ")
}

// DecodeWorkflowDocument reads body, a POST /v1/workflows body, with the
// route's own checks (unknown and read-only fields refused, the same
// field errors). A body that is not a JSON object is a
// *service.ValidationError on the field "document" (the route's 400).
func DecodeWorkflowDocument(body []byte) (service.WorkflowInput, error) {
	var req workflowRequest
	if err := decodeStrict(body, &req, workflowReadOnly...); err != nil {
		var p *problem
		if errors.As(err, &p) {
			return service.WorkflowInput{}, &service.ValidationError{Fields: []service.FieldError{{Field: "document", Message: p.Detail}}}
		}
		return service.WorkflowInput{}, err
	}
	return req.input()
}
