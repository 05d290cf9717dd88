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

  const body = '{"trigger":{"level":"error"},"window":[{"level":"info"},{"level":"error"}]}';
  assert.deepEqual(await post(body, signedHeaders(body)), [200, '{"status":"accepted"}']);
  assert.equal((await post(body.replace("info", "debug"), signedHeaders(body)))[0], 401);

  for (let i = 0; i < 100 && r.requests.length === 0; i++) await sleep(50);
  assert.equal(r.requests.length, 1, "one result, none for the forged call");
  assert.equal(r.requests[0].headers["x-api-key"], "sk_example");
  assert.deepEqual(JSON.parse(r.requests[0].body), { request_id: signedHeaders(body)["X-Request-Id"], payload: { records: 3, errors: 2 } });
});
