package service

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/workflow"
)

// Lineage: what a run's templated node was rendered from
// (service/workflow, lineage.go); the engine keeps it when the node's
// templates render, GET of a run reads it.

// RenderedFromMax bounds a node's lineage, in bytes of JSON.
const RenderedFromMax = workflow.RenderedFromMax

type (
	// RenderedFrom is what a templated node was rendered from.
	RenderedFrom = workflow.RenderedFrom
	// RenderedNode is an upstream node as a template saw it when it rendered.
	RenderedNode = workflow.RenderedNode
)

// renderedFrom is the lineage of node n from the data t holds now
// (workflow.Lineage).
func (t *runTemplates) renderedFrom(n storedNode, payload, runIf bool) (RenderedFrom, bool) {
	return workflow.Lineage(t.g, n, t.inputs, t.nodes, payload, runIf)
}

// keepLineage stores the lineage of the nodes of run that rendered in
// this advance: fired are the nodes that fire (their payload templates
// render unless their run_if broke them, broken), skipped those their
// run_if skipped, ranIf the nodes whose run_if rendered. One statement,
// none when no node rendered.
func (t *runTemplates) keepLineage(ctx context.Context, tx db.Tx, fired, skipped []string, broken map[string]string,
	ranIf map[string]bool,
) error {
	if t == nil {
		return nil
	}
	var keys, docs []string
	for i, k := range slices.Concat(fired, skipped) {
		_, isBroken := broken[k]
		payload := i < len(fired) && !isBroken
		rf, ok := t.renderedFrom(t.g.Nodes[t.g.Index[k]], payload, ranIf[k])
		if !ok {
			continue
		}
		b, err := json.Marshal(rf)
		if err != nil {
			return err
		}
		keys, docs = append(keys, k), append(docs, string(b))
	}
	if len(keys) == 0 {
		return nil
	}
	return storeError(db.SetRunNodeLineage(ctx, tx, t.run.TenantID, t.run.ID, keys, docs), "store run node lineage")
}

// runLineage reads the lineage of a run's nodes, by key.
func runLineage(ctx context.Context, q db.Querier, tenant, runID string) (map[string]*RenderedFrom, error) {
	rows, err := db.GetRunLineage(ctx, q, tenant, runID)
	if err != nil {
		return nil, storeError(err, "load run node lineage")
	}
	return workflow.DecodeLineage(rows)
}
