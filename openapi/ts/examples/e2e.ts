// The whole round trip against a running ax server: start a webhook
// receiver, create an endpoint pointing at it and a task that fires every
// second, verify two signed deliveries with the endpoint's secret (Standard
// Webhooks, the `standardwebhooks` package), list the task's executions,
// then pause and delete the task and delete the endpoint.
//
//   cd openapi/ts && npm ci && npm run build:examples
//   AX_URL=http://localhost:8080 AX_TOKEN=... node build/examples/e2e.js
//
// The token needs the scopes tasks:read tasks:write endpoints:read
// endpoints:write executions:read. The receiver listens on 127.0.0.1, a
// private address: the server must run with AX_ALLOW_PRIVATE_TARGETS=true.
// Any failure ends the process with exit code 1.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { text } from "node:stream/consumers";
import { Webhook } from "standardwebhooks";
import { createAxClient, newIdempotencyKey, ok } from "../src/index.js";

const url = process.env.AX_URL ?? "http://localhost:8080";
const token = process.env.AX_TOKEN ?? "";
const ax = createAxClient(url, token);

/** A delivery the receiver verified: its webhook-id and the parsed payload. */
interface Delivery {
  id: string;
  payload: unknown;
}

// The receiver. Its verifier is set once the endpoint, and so its secret,
// exists; a delivery whose signature does not verify is answered 401 and
// fails the example.
let webhook: Webhook | undefined;
const deliveries: Delivery[] = [];
const failures: string[] = [];

function header(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return typeof value === "string" ? value : "";
}

async function receive(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await text(req); // the raw body: the signature covers its bytes
  const headers = {
    "webhook-id": header(req, "webhook-id"),
    "webhook-timestamp": header(req, "webhook-timestamp"),
    "webhook-signature": header(req, "webhook-signature"),
  };
  try {
    if (webhook === undefined) {
      throw new Error("a delivery before the endpoint exists");
    }
    // verify throws unless a v1 signature matches and the timestamp is recent.
    const payload = webhook.verify(body, headers);
    deliveries.push({ id: headers["webhook-id"], payload });
    res.writeHead(204).end();
  } catch (err) {
    failures.push(`delivery ${headers["webhook-id"]}: ${String(err)}`);
    res.writeHead(401).end();
  }
}

const server = createServer((req, res) => {
  receive(req, res).catch((err: unknown) => {
    failures.push(String(err));
    res.writeHead(500).end();
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const address = server.address();
if (address === null || typeof address === "string") {
  throw new Error("the receiver has no TCP address");
}
const hookUrl = `http://127.0.0.1:${address.port}/hooks/ax`;
console.log("receiver listening on", hookUrl);

/** waitForDeliveries resolves once n deliveries verified; it rejects on a failed one or after timeoutMs. */
async function waitForDeliveries(n: number, timeoutMs: number): Promise<Delivery[]> {
  const deadline = Date.now() + timeoutMs;
  while (deliveries.length < n) {
    if (failures.length > 0) {
      throw new Error(failures.join("; "));
    }
    if (Date.now() > deadline) {
      throw new Error(`${deliveries.length} of ${n} deliveries within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return deliveries.slice(0, n);
}

async function main(): Promise<void> {
  const endpoint = ok(
    await ax.POST("/v1/endpoints", {
      params: { header: { "Idempotency-Key": newIdempotencyKey() } },
      body: { name: "e2e-receiver", url: hookUrl },
    }),
  );
  // The secret is shown once, in this answer: a real receiver stores it now.
  webhook = new Webhook(endpoint.secret);
  console.log("endpoint created", endpoint.id);

  const task = ok(
    await ax.POST("/v1/tasks", {
      params: { header: { "Idempotency-Key": newIdempotencyKey() } },
      body: {
        name: "e2e.every-second",
        endpoint_id: endpoint.id,
        schedule: { type: "interval", interval_seconds: 1 },
        payload: { order: 42 },
      },
    }),
  );
  console.log("task created", task.id, "next run", task.next_run_at ?? "never");

  const received = await waitForDeliveries(2, 30_000);
  received.forEach((d, i) => {
    console.log(`verified delivery ${i + 1}`, d.id, JSON.stringify(d.payload));
  });

  // ax queues upcoming slots ahead as pending executions: until=now lists
  // only those already due, the delivered ones among them (newest first).
  const executions = ok(
    await ax.GET("/v1/executions", {
      params: { query: { task_id: task.id, until: new Date().toISOString(), limit: 10 } },
    }),
  );
  console.log("executions", executions.items.length);
  for (const x of executions.items) {
    console.log("execution", x.id, x.state, x.scheduled_for);
  }

  const paused = ok(await ax.POST("/v1/tasks/{id}/pause", { params: { path: { id: task.id } } }));
  console.log("task paused", paused.id, "next run", paused.next_run_at ?? "none");

  // A delete answers 204 without a body: check the status itself.
  const taskGone = await ax.DELETE("/v1/tasks/{id}", { params: { path: { id: task.id } } });
  if (!taskGone.response.ok) {
    throw new Error(`delete task: ${taskGone.response.status}`);
  }
  console.log("task deleted", task.id);
  // An endpoint is deleted once no task uses it (409 before).
  const endpointGone = await ax.DELETE("/v1/endpoints/{id}", { params: { path: { id: endpoint.id } } });
  if (!endpointGone.response.ok) {
    throw new Error(`delete endpoint: ${endpointGone.response.status}`);
  }
  console.log("endpoint deleted", endpoint.id);
}

try {
  await main();
  console.log("ok");
} catch (err) {
  console.error("e2e failed:", err);
  process.exitCode = 1;
} finally {
  server.closeAllConnections();
  server.close();
}
