// Package api is ax's REST API: echo handlers, JWT authentication, request
// and response types with their OpenAPI annotations, and the mapping of
// every error to an RFC 9457 problem. Handlers are thin: bind, authorize,
// call service, render. There is no SQL here.
package api

// The general API information below is read by swag (`make generate`, see
// package openapi); it is not part of the package documentation.
// Swagger 2.0 has no bearer scheme, so BearerAuth is declared as an API key
// in the Authorization header; the OpenAPI 3 conversion turns it into an
// http/bearer scheme with bearerFormat JWT.

//	@title						ax API
//	@version					1
//	@license.name				MIT
//	@license.url				https://opensource.org/licenses/MIT
//	@description				ax schedules HTTP webhooks for many tenants: cron, interval and one-off tasks that call your endpoints, with retries and a full execution history.
//	@description				Every /v1 route needs `Authorization: Bearer <JWT>`; errors are RFC 9457 `application/problem+json` documents. A 503 with a `Retry-After` header means the database is unreachable: nothing was wrong with the request; send it again after that many seconds.
//	@BasePath					/
//
//	@securityDefinitions.apikey	BearerAuth
//	@in							header
//	@name						Authorization
//	@description				Bearer <JWT>: a JWT whose `tenant` claim names the caller's tenant and whose `scope` claim lists its scopes (`admin`: every tenant scope). An operator token has the tenant claim `*` and the `operator` scope: it reads and sets any tenant's limits (/v1/admin/tenants/{tenant}/limits), lists the replicas and opens River UI, and reaches no tenant's resources.
