import http from "node:http";
import { Client, parseCall } from "@otelcol-svc/agent";

const secret = process.env.OTELCOL_SVC_SIGNING_SECRET; // the project's whsec_... secret
const client = new Client(process.env.OTELCOL_SVC_RECEIVER_URL ?? "http://localhost:4318", process.env.OTELCOL_SVC_API_KEY);

function isError(r) { // an OTLP log at ERROR or above (severityNumber 17+), a failed span or event
  const code = typeof r.status === "object" && r.status !== null ? r.status.code : r.status;
  return (Number.isInteger(r.severityNumber) && r.severityNumber >= 17) || ["ERROR", "FATAL"].includes(String(r.severityText ?? "").toUpperCase())
    || Boolean(r.error) || ["error", "failed", "STATUS_CODE_ERROR"].includes(code);
}

function analyse(call) { // your agent: here, count the errors among the records
  const records = call.isWindow ? [call.trigger, ...call.window] : call.records;
  return { records: records.length, errors: records.filter(isError).length };
}

http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  let call;
  try {
    call = parseCall(secret, req.headers, Buffer.concat(chunks));
  } catch (err) {
    return res.writeHead(err.status ?? 500).end(err.message);
  }
  res.writeHead(200, { "Content-Type": "application/json" }).end('{"status":"accepted"}');
  client.sendResult(analyse(call), call.requestId).catch((err) => console.error(err)); // after answering
}).listen(Number(process.env.PORT ?? 8000));
