// Package api is ax's REST API: echo handlers, JWT authentication, request
// and response types with their OpenAPI annotations, and the mapping of
// every error to an RFC 9457 problem. Handlers are thin: bind, authorize,
// call service, render. There is no SQL here.
package api
