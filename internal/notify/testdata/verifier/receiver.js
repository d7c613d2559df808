// An independent Standard Webhooks receiver: it verifies every POST with
// the standardwebhooks npm package (not with payout's code) under the
// secret in VERIFIER_SECRET, answers 204 when it verifies and 401 when it
// does not, and prints one JSON line per request on stdout:
//   {"listening": PORT}                      once, first
//   {"id": ..., "ok": true, "type": ..., "externalId": ..., "sequence": N}
//   {"id": ..., "ok": false, "error": "..."}
// Usage: VERIFIER_SECRET=whsec_... node receiver.js [port]
"use strict";
const http = require("http");
const { Webhook } = require("standardwebhooks");

const wh = new Webhook(process.env.VERIFIER_SECRET);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const id = req.headers["webhook-id"] || "";
    try {
      const ev = wh.verify(body, req.headers);
      out({ id, ok: true, type: ev.type, externalId: ev.externalId || "", sequence: ev.sequence || 0 });
      res.writeHead(204);
    } catch (e) {
      out({ id, ok: false, error: String(e && e.message) });
      res.writeHead(401);
    }
    res.end();
  });
});
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => out({ listening: server.address().port }));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
