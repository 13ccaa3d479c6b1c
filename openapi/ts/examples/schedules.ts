// The four shapes of a schedule, a union discriminated by `type`: each
// type requires its own field and takes no other type's. `make ts-check`
// type-checks this file, so the @ts-expect-error lines fail the check if
// the generated types ever accept those schedules again.
import type { components } from "../src/schema.js";

type Schedule = components["schemas"]["Schedule"];

export const schedules: Schedule[] = [
  { type: "cron", cron: "0 2 * * *", timezone: "Asia/Shanghai", dialect: "standard" },
  { type: "interval", interval_seconds: 60 },
  { type: "once", run_at: "2027-01-01T00:00:00Z" },
  {
    type: "union",
    schedules: [
      { type: "cron", cron: "0 9 * * MON-FRI", timezone: "Europe/Paris" },
      { type: "interval", interval_seconds: 21600 },
    ],
  },
  { type: "event", event: "files.ready" },
];

// @ts-expect-error a cron schedule needs cron
export const noCron: Schedule = { type: "cron" };
// @ts-expect-error an interval schedule takes no cron
export const foreignCron: Schedule = { type: "interval", interval_seconds: 60, cron: "0 2 * * *" };
// @ts-expect-error a once schedule needs run_at
export const noRunAt: Schedule = { type: "once" };
// @ts-expect-error a union holds cron and interval schedules only
export const nested: Schedule = { type: "union", schedules: [{ type: "once", run_at: "2027-01-01T00:00:00Z" }] };
// @ts-expect-error an event schedule needs event
export const noEvent: Schedule = { type: "event" };

// Narrowing on type gives each variant's fields without casts.
export function describe(s: Schedule): string {
  switch (s.type) {
    case "cron":
      return `cron ${s.cron}`;
    case "interval":
      return `every ${s.interval_seconds}s`;
    case "once":
      return `once at ${s.run_at}`;
    case "union":
      return s.schedules.map((m) => (m.type === "cron" ? `cron ${m.cron}` : `every ${m.interval_seconds}s`)).join(" or ");
    case "event":
      return `on each ${s.event} event`;
  }
}
