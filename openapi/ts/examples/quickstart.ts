// Creates an endpoint and a task, reads the task back, lists executions,
// pauses and deletes the task. Run against a server:
//   npm ci && npm run build:examples
//   AX_URL=http://localhost:8080 AX_TOKEN=... node build/examples/quickstart.js
// (`make ts-check` type-checks it with tsc --strict; no casts.) examples/e2e.ts
// goes further: it receives the webhooks and verifies their signatures.
import { createAxClient, newIdempotencyKey, ok } from "../src/index.js";

const url = process.env.AX_URL ?? "http://localhost:8080";
const token = process.env.AX_TOKEN ?? "";
const ax = createAxClient(url, token);

const endpoint = ok(
  await ax.POST("/v1/endpoints", {
    params: { header: { "Idempotency-Key": newIdempotencyKey() } },
    body: { name: "billing", url: "https://hooks.example.com/ax" },
  }),
);
console.log("endpoint", endpoint.id, "secret", endpoint.secret);

const task = ok(
  await ax.POST("/v1/tasks", {
    params: { header: {} },
    body: {
      name: "order.reconcile.daily",
      endpoint_id: endpoint.id,
      schedule: { type: "cron", cron: "0 2 * * *", timezone: "Asia/Shanghai" },
      payload: { shop: 42 },
    },
  }),
);
const again = ok(await ax.GET("/v1/tasks/{id}", { params: { path: { id: task.id } } }));
console.log("task", again.name, "next run", again.next_run_at ?? "never");

const executions = ok(await ax.GET("/v1/executions", { params: { query: { task_id: task.id, limit: 10 } } }));
for (const x of executions.items) {
  console.log("execution", x.id, x.state, x.scheduled_for);
}

const paused = ok(await ax.POST("/v1/tasks/{id}/pause", { params: { path: { id: task.id } } }));
console.log("paused; next run", paused.next_run_at ?? "none");
await ax.DELETE("/v1/tasks/{id}", { params: { path: { id: task.id } } });
