package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// meResponse describes the caller.
type meResponse struct {
	// Tenant is the tenant the caller acts for; "*" for an operator token, which acts for none.
	Tenant  string   `json:"tenant" example:"demo"`
	Subject string   `json:"subject" example:"ci-bot"`
	Scopes  []string `json:"scopes" example:"tasks:read,tasks:write"`
} // @name Me

// me godoc
//
//	@ID			me
//	@Summary		The caller's tenant and scopes
//	@Description	Any valid token may call it, an operator token too.
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
	tenant := p.Tenant
	if p.Operator() {
		tenant = OperatorTenant
	}
	return c.JSON(http.StatusOK, meResponse{Tenant: tenant, Subject: p.Subject, Scopes: scopes})
}
