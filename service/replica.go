package service

import (
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/replica"
)

// Replica liveness (service/replica), as the service's callers name it.
const (
	ReplicaDeadAfterDefault = replica.DeadAfterDefault
	ReplicaDeadAfterMin     = replica.DeadAfterMin
	ReplicaDeadAfterMax     = replica.DeadAfterMax
)

// Replicas keeps the replica rows (replica.Registry).
type Replicas = replica.Registry

// NewReplicas returns the replica registry on pool; the deliveries it
// resumes get a reconciled event.
func NewReplicas(pool *db.Pool) *Replicas { return replica.New(pool, EventReconciled) }
