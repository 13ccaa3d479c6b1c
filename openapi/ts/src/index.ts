// TypeScript client for the ax API: `paths` and `components` are generated
// from openapi/openapi.json by openapi-typescript (src/schema.d.ts; `npm run
// generate` or `make ts-check` regenerates it), and createAxClient is an
// openapi-fetch client that sends the bearer token with every request.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Schemas = components["schemas"];
export type Problem = Schemas["Problem"];

/** createAxClient returns a typed client for the ax server at baseUrl. */
export function createAxClient(baseUrl: string, token: string, fetchImpl?: typeof fetch): Client<paths> {
  const client = createClient<paths>({ baseUrl, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  const auth: Middleware = {
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${token}`);
      return request;
    },
  };
  client.use(auth);
  return client;
}

/** ProblemError is an answer that was not a 2xx, with its RFC 9457 body. */
export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(`ax: ${status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ""}`);
    this.name = "ProblemError";
  }
}

/** ok returns the data of a 2xx answer and throws a ProblemError otherwise. */
export function ok<T>(result: { data?: T; error?: Problem; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) {
    const problem: Problem = result.error ?? {
      type: "about:blank",
      title: result.response.statusText,
      status: result.response.status,
    };
    throw new ProblemError(result.response.status, problem);
  }
  return result.data;
}

/** newIdempotencyKey returns a random key for a create's Idempotency-Key header. */
export function newIdempotencyKey(): string {
  return crypto.randomUUID();
}
