package template

import (
	"fmt"
	"slices"
	"strings"
	"text/template/parse"
)

// checker walks a parsed template and stops at the first data name that
// cannot exist for its scope. Fields read where dot is the data (not
// inside a range or a with, where dot is what they chose) and through $
// are checked; other variables hold values the checked pipelines made.
type checker struct {
	scope Scope
	err   error
	// reads collects the run data the template names (Template.Reads).
	reads Reads
	// names are the data the template reads (a render builds only
	// those).
	names names
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// list checks the nodes of l; root: dot is the data.
func (c *checker) list(l *parse.ListNode, root bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			c.pipe(n.Pipe, root)
		case *parse.IfNode:
			c.pipe(n.Pipe, root)
			c.list(n.List, root)
			c.list(n.ElseList, root)
		case *parse.RangeNode:
			c.pipe(n.Pipe, root)
			c.list(n.List, false)
			c.list(n.ElseList, root)
		case *parse.WithNode:
			c.pipe(n.Pipe, root)
			c.list(n.List, false)
			c.list(n.ElseList, root)
		case *parse.TemplateNode:
			c.fail("{{template}} is not supported: a payload string is one template")
		}
	}
}

func (c *checker) pipe(p *parse.PipeNode, root bool) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			c.arg(arg, root)
		}
	}
}

func (c *checker) arg(n parse.Node, root bool) {
	switch n := n.(type) {
	case *parse.FieldNode:
		if root {
			c.name(n.Ident)
		}
	case *parse.DotNode:
		if root { // the data as a whole: {{ . }}, {{ index . $k }}, {{ range $k, $v := . }}
			c.names = allNames
		}
	case *parse.VariableNode:
		switch {
		case n.Ident[0] != "$":
		case len(n.Ident) > 1:
			c.name(n.Ident[1:])
		default: // $ alone: the data as a whole
			c.names = allNames
		}
	case *parse.ChainNode:
		switch inner := n.Node.(type) {
		case *parse.FieldNode:
			if root {
				c.name(append(slices.Clone(inner.Ident), n.Field...))
			}
		case *parse.VariableNode:
			if inner.Ident[0] == "$" {
				c.name(append(slices.Clone(inner.Ident[1:]), n.Field...))
			}
		case *parse.PipeNode:
			// (.a).b reads .a.b; another pipeline's fields are its value's.
			if len(inner.Decl) == 0 && len(inner.Cmds) == 1 && len(inner.Cmds[0].Args) == 1 {
				if f, ok := inner.Cmds[0].Args[0].(*parse.FieldNode); ok {
					c.arg(&parse.ChainNode{Node: f, Field: n.Field}, root)
					return
				}
			}
			c.pipe(inner, root)
		}
	case *parse.PipeNode:
		c.pipe(n, root)
	case *parse.IdentifierNode:
		if strings.HasPrefix(n.Ident, internalPref) {
			c.fail("there is no function %q", n.Ident)
		}
	}
}

// name checks a chain of field names read from the data (.a.b.c is
// [a b c]).
func (c *checker) name(idents []string) {
	if len(idents) == 0 {
		return
	}
	top := idents[0]
	dotted := "." + strings.Join(idents, ".")
	if !slices.Contains(c.scope.Names(), top) {
		c.fail("%s: there is no data .%s here (there are .%s)", dotted, top, strings.Join(c.scope.Names(), ", ."))
		return
	}
	c.names |= nameBit(top)
	switch top {
	case NameInputs:
		if len(idents) > 1 && c.scope.Inputs != nil && !slices.Contains(c.scope.Inputs, idents[1]) {
			c.fail("%s: the workflow has no input %q", dotted, idents[1])
		}
		c.reads.addInput(idents)
	case NameNodes:
		c.reads.addNode(idents)
		if len(idents) < 2 {
			return
		}
		if !slices.Contains(c.scope.Upstream, idents[1]) {
			c.fail("%s: %q is not an upstream node of this node", dotted, idents[1])
			return
		}
		if len(idents) < 3 {
			return
		}
		switch idents[2] {
		case "output":
		case "status":
			if len(idents) > 3 {
				c.fail("%s: .status is a string; it has no fields", dotted)
			}
		default:
			c.fail("%s: a node has .output and .status", dotted)
		}
	case NameEvent:
		if len(idents) < 2 {
			return
		}
		switch idents[1] {
		case "payload":
		case "name", "key":
			if len(idents) > 2 {
				c.fail("%s: .event.%s is a string; it has no fields", dotted, idents[1])
			}
		default:
			c.fail("%s: an event has .name, .key and .payload", dotted)
		}
	default:
		if len(idents) > 1 {
			c.fail("%s: .%s is a single value; it has no fields", dotted, top)
		}
	}
}

// names is a set of the data's names: bit i is dataNames[i].
type names uint32

// The data's names by index (dataNames).
const (
	iScheduledFor = iota
	iScheduledForLocal
	iBusinessDate
	iTimezone
	iExecutionID
	iTaskID
	iTaskName
	iRound
	iShardIndex
	iShardCount
	iTrigger
	iWorkflowID
	iWorkflowRunID
	iInputs
	iNodes
	iEvent
)

// scalarCount is how many names are scalars (a string or an int): those
// before .inputs, .nodes and .event, which are documents.
const scalarCount = iInputs

// dataNames are every name of the data, by index.
var dataNames = [...]string{
	iScheduledFor: NameScheduledFor, iScheduledForLocal: NameScheduledForLocal, iBusinessDate: NameBusinessDate,
	iTimezone: NameTimezone, iExecutionID: NameExecutionID, iTaskID: NameTaskID, iTaskName: NameTaskName,
	iRound: NameRound, iShardIndex: NameShardIndex, iShardCount: NameShardCount, iTrigger: NameTrigger,
	iWorkflowID: NameWorkflowID, iWorkflowRunID: NameWorkflowRunID,
	iInputs: NameInputs, iNodes: NameNodes, iEvent: NameEvent,
}

// allNames is every name: a template that reads the data as a whole.
const allNames = names(1)<<len(dataNames) - 1

// nameBit is name's bit (0: not a name of the data).
func nameBit(name string) names {
	if i := nameIndex(name); i >= 0 {
		return 1 << i
	}
	return 0
}

// nameIndex is name's index in dataNames, or -1.
func nameIndex(name string) int {
	for i, n := range dataNames {
		if n == name {
			return i
		}
	}
	return -1
}

func (ns names) has(i int) bool { return ns&(1<<i) != 0 }

// Reads is the run data a workflow node's template names: the run's
// inputs and the upstream nodes it reads, each name once, sorted. A
// template that reads .inputs or .nodes as a whole (ranging over it,
// indexing it by a computed key) reads all of them: AllInputs, AllNodes.
type Reads struct {
	Inputs, Nodes       []string
	AllInputs, AllNodes bool
}

// Empty reports whether r names no run data.
func (r Reads) Empty() bool {
	return len(r.Inputs) == 0 && len(r.Nodes) == 0 && !r.AllInputs && !r.AllNodes
}

// Union returns what r and o read together.
func (r Reads) Union(o Reads) Reads {
	return Reads{
		Inputs: sortedUnion(r.Inputs, o.Inputs), Nodes: sortedUnion(r.Nodes, o.Nodes),
		AllInputs: r.AllInputs || o.AllInputs, AllNodes: r.AllNodes || o.AllNodes,
	}
}

// addInput records .inputs[.name…].
func (r *Reads) addInput(idents []string) {
	if len(idents) < 2 {
		r.AllInputs = true
		return
	}
	r.Inputs = sortedUnion(r.Inputs, idents[1:2])
}

// addNode records .nodes[.key…].
func (r *Reads) addNode(idents []string) {
	if len(idents) < 2 {
		r.AllNodes = true
		return
	}
	r.Nodes = sortedUnion(r.Nodes, idents[1:2])
}

func sortedUnion(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
