// The README's example agent, run as a user would: a process called over HTTP.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { SECRET, accepted, receiver, signedHeaders } from "./helpers.js";

const example = fileURLToPath(new URL("../examples/agent.js", import.meta.url));
const readme = fileURLToPath(new URL("../README.md", import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("the README shows the example", () => {
  assert.ok(readFileSync(readme, "utf8").includes(readFileSync(example, "utf8")), "README.md and examples/agent.js differ");
});

// Records as the receiver stores them from OTLP (contract section 4): an error log, an
// info log, and a span that failed. Only severityNumber/severityText tell a log's level.
const resource = { "service.name": "checkout", "k8s.namespace.name": "shop" };
const errorLog = {
  resourceAttributes: resource, scope: { name: "app.logger" }, severityNumber: 17, severityText: "ERROR",
  body: "payment failed", attributes: { "http.status_code": 502 }, traceId: "5b8efff798038103d269b633813fc60c",
  spanId: "eee19b7ec3c1b174", timestamp: "2024-05-01T12:00:00.123456789Z",
};
const infoLog = {
  resourceAttributes: resource, scope: { name: "app.logger" }, severityNumber: 9, severityText: "INFO",
  body: "retrying", attributes: {}, traceId: "", spanId: "", timestamp: "2024-05-01T12:00:01.000000000Z",
};
const errorSpan = {
  resourceAttributes: resource, scope: { name: "app.tracer" }, traceId: "5b8efff798038103d269b633813fc60c",
  spanId: "eee19b7ec3c1b174", parentSpanId: "", name: "POST /pay", kind: "server", startTime: "2024-05-01T12:00:00Z",
  endTime: "2024-05-01T12:00:00.25Z", durationMs: 250, status: { code: "error", message: "upstream 502" },
  attributes: {}, events: [],
};

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

test("the example agent answers a call and sends its result", async (t) => {
  const r = await receiver(t, accepted);
  const port = await freePort();
  const proc = spawn(process.execPath, [example], {
    env: { ...process.env, PORT: String(port), OTELCOL_SVC_SIGNING_SECRET: SECRET, OTELCOL_SVC_API_KEY: "sk_example", OTELCOL_SVC_RECEIVER_URL: r.url },
    stdio: "ignore",
  });
  t.after(() => proc.kill());

  const post = async (body, headers) => {
    for (let i = 0; i < 100; i++) {
      try {
        const resp = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers, body });
        return [resp.status, await resp.text()];
      } catch {
        await sleep(50); // until the agent listens
      }
    }
    assert.fail("the example agent did not start listening");
  };

  const body = JSON.stringify({ trigger: errorLog, window: [infoLog, errorSpan] });
  assert.deepEqual(await post(body, signedHeaders(body)), [200, '{"status":"accepted"}']);
  assert.equal((await post(body.replace("retrying", "recovered"), signedHeaders(body)))[0], 401);

  for (let i = 0; i < 100 && r.requests.length === 0; i++) await sleep(50);
  assert.equal(r.requests.length, 1, "one result, none for the forged call");
  assert.equal(r.requests[0].headers["x-api-key"], "sk_example");
  assert.deepEqual(JSON.parse(r.requests[0].body), { request_id: signedHeaders(body)["X-Request-Id"], payload: { records: 3, errors: 2 } });
});
