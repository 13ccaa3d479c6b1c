// Package yamldoc reads YAML as the JSON documents ax's API takes: the
// console's workflow editor and `ax apply` accept YAML, and both must
// hand the server exactly what the same text written as JSON would.
package yamldoc

import "go.yaml.in/yaml/v3"

// KeepTimestamps retags n's unquoted dates and times (2026-12-25,
// 2026-12-25T02:00:00Z) as strings, as written. YAML would otherwise
// decode them as instants, which encode back to JSON as
// "2026-12-25T00:00:00Z": a calendar's date or a schedule's start_at
// would reach the server changed.
func KeepTimestamps(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		KeepTimestamps(c)
	}
}
