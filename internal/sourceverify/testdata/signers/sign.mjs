// Signs requests with the senders' own libraries, for internal/sourceverify's tests:
// reads a JSON array of {scheme, secret, body, id?, timestamp?} on stdin and writes a JSON
// array of the headers each sender would send.
import { sign as githubSign } from "@octokit/webhooks-methods";
import { Webhook } from "standardwebhooks";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const req of JSON.parse(input)) {
  switch (req.scheme) {
    case "github":
      out.push({ "X-Hub-Signature-256": await githubSign(req.secret, req.body) });
      break;
    case "standard_webhooks": {
      const at = new Date(req.timestamp * 1000);
      out.push({
        "webhook-id": req.id,
        "webhook-timestamp": String(req.timestamp),
        "webhook-signature": new Webhook(req.secret).sign(req.id, at, req.body),
      });
      break;
    }
    default:
      throw new Error(`no signer for ${req.scheme}`);
  }
}
process.stdout.write(JSON.stringify(out));
