package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// replicaResponse is a live ax replica: one start of an ax process.
type replicaResponse struct {
	// ID is new every time a process starts (and when a replica that was
	// declared dead registers again).
	ID       string `json:"id" example:"01936f4e-8a3b-7c2d-9e1f-2a3b4c5d6e7f"`
	Hostname string `json:"hostname" example:"ax-7d9f8b6c5-x2k4q"`
	// StartedAt is when the replica registered (database clock).
	StartedAt timestamp `json:"started_at" swaggertype:"string" format:"date-time"`
	// LastHeartbeatAt is its last heartbeat (database clock); one silent
	// for AX_REPLICA_DEAD_AFTER is declared dead and leaves this list.
	LastHeartbeatAt timestamp `json:"last_heartbeat_at" swaggertype:"string" format:"date-time"`
	// Version is the ax version it runs.
	Version string `json:"version" example:"v1.4.0"`
	// DeliveriesInFlight is the webhook requests it had under way at its
	// last heartbeat.
	DeliveriesInFlight int `json:"deliveries_in_flight" example:"12"`
} // @name Replica

// replicaList lists the live replicas.
type replicaList struct {
	Items []replicaResponse `json:"items"`
} // @name ReplicaList

// listReplicas godoc
//
//	@ID				listReplicas
//	@Summary		List the live ax replicas (operator)
//	@Description	Operator tokens only: a tenant's own tokens, admin included, get a 403. Every ax process heartbeats while it runs. One silent for AX_REPLICA_DEAD_AFTER (default 15s) is declared dead by another, which resumes the deliveries it was running at once, with the same idempotency keys; it leaves this list. Oldest start first.
//	@Tags			admin
//	@Produce		json
//	@Security		BearerAuth
//	@Success		200		{object}	replicaList
//	@Failure		401,403,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/admin/replicas [get]
func (h *handlers) listReplicas(c echo.Context) error {
	rs, err := h.cfg.Replicas.Live(c.Request().Context())
	if err != nil {
		return err
	}
	out := replicaList{Items: make([]replicaResponse, 0, len(rs))}
	for _, r := range rs {
		out.Items = append(out.Items, replicaResponse{
			ID: r.ID, Hostname: r.Hostname, StartedAt: stamp(r.StartedAt), LastHeartbeatAt: stamp(r.LastHeartbeatAt),
			Version: r.Version, DeliveriesInFlight: r.DeliveriesInFlight,
		})
	}
	return c.JSON(http.StatusOK, out)
}
