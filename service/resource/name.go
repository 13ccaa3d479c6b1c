package resource

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/axhq/ax/service/errs"
)

// The forms of names and label keys, as regular expressions that Go and
// ECMA-262 (the OpenAPI document's patterns) read alike.
const (
	// NamePattern is a task's or a workflow's name: lower-case letters of
	// any script (and letters of scripts without case, such as 订单),
	// digits of any script, and '.', '_', '-'.
	NamePattern = `^[\p{Ll}\p{Lo}\p{Lm}\p{Nd}][\p{Ll}\p{Lo}\p{Lm}\p{Mn}\p{Mc}\p{Nd}._-]{0,127}$`
	// LabelKeyPattern is a label's key.
	LabelKeyPattern = `^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`
)

// NameRule is the message of a name that does not match NamePattern.
const NameRule = "must be 1 to 128 characters: lower-case or uncased letters and digits of any script, '.', '_', '-', " +
	"starting with a letter or digit (e.g. order.reconcile.daily, 订单.对账.每日)"

// Labels' bounds.
const (
	LabelsMax     = 32
	labelValueMax = 256
)

var labelKeyPattern = regexp.MustCompile(LabelKeyPattern)

// CheckLabels adds the invalid labels to ve.
func CheckLabels(ve *errs.ValidationError, labels map[string]string) {
	if len(labels) > LabelsMax {
		ve.Add("labels", fmt.Sprintf("at most %d labels", LabelsMax))
		return
	}
	for k, v := range labels {
		if !labelKeyPattern.MatchString(k) {
			ve.Add("labels."+k, "key must match "+LabelKeyPattern)
		}
		if len(v) > labelValueMax || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 }) {
			ve.Add("labels."+k, fmt.Sprintf("value must be at most %d characters without control characters", labelValueMax))
		}
	}
}

// ParseLabelFilter reads a label filter, key:value or key=value (the
// API's ?label= and the console's filter take both): it splits at the
// first ':' or '=', which no label key holds (LabelKeyPattern), so the
// value may hold either. ok is false without a separator or a key.
func ParseLabelFilter(s string) (key, value string, ok bool) {
	i := strings.IndexAny(s, ":=")
	if i <= 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// LabelFilterRule is the message of a label filter ParseLabelFilter
// refuses.
const LabelFilterRule = "must be key:value or key=value"
