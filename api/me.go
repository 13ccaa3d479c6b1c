package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// meResponse describes the caller.
type meResponse struct {
	Tenant  string   `json:"tenant" example:"demo"`
	Subject string   `json:"subject" example:"ci-bot"`
	Scopes  []string `json:"scopes" example:"tasks:read,tasks:write"`
} // @name Me

// me godoc
//
//	@ID			me
//	@Summary		The caller's tenant and scopes
//	@Description	Any valid token may call it.
//	@Tags			auth
//	@Produce		json
//	@Security		BearerAuth
//	@Success		200	{object}	meResponse
//	@Failure		401,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/me [get]
func (h *handlers) me(c echo.Context) error {
	p := principalFrom(c)
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return c.JSON(http.StatusOK, meResponse{Tenant: p.Tenant, Subject: p.Subject, Scopes: scopes})
}
