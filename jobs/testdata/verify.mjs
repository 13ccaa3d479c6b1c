// Verifies one webhook with the Standard Webhooks reference library, the way
// a receiver would. Used by jobs/verify_test.go.
//
// Usage: node verify.mjs <whsec_ secret> <headers as a JSON object> < body
// Prints "ok" and exits 0 when the signature verifies; otherwise prints the
// library's error message and exits 1.
import { Webhook } from "standardwebhooks";

const [secret, headersJSON] = process.argv.slice(2);
if (!secret || !headersJSON) {
  console.log("usage: node verify.mjs <secret> <headers-json> < body");
  process.exit(2);
}

const chunks = [];
for await (const chunk of process.stdin) {
  chunks.push(chunk);
}
const body = Buffer.concat(chunks);

try {
  new Webhook(secret).verify(body, JSON.parse(headersJSON));
  console.log("ok");
} catch (err) {
  console.log(err.message);
  process.exitCode = 1;
}
