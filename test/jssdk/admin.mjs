// admin.mjs calls cfp emulator's admin API (/_cfp/...), signed like any Cosmos DB request plus
// its body (emulator SignRequest, auth.SignWithBody): resource type and link from the
// path, RFC 1123 date, and the base64 SHA-256 of the body (of no bytes when there is none).

import { createHash, createHmac } from "node:crypto";

export class AdminError extends Error {}

// adminClient returns admin(method, path, body) for the emulator at endpoint with key.
export function adminClient(endpoint, key) {
  return async function admin(method, path, body) {
    const date = new Date().toUTCString();
    const segs = path.replace(/^\/+|\/+$/g, "").split("/");
    const [type, link] = segs.length % 2 === 1 ? [segs.at(-1), segs.slice(0, -1).join("/")] : [segs.at(-2), segs.join("/")];
    const payload = body === undefined ? "" : JSON.stringify(body);
    const digest = createHash("sha256").update(payload).digest("base64");
    const text = `${method.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${date.toLowerCase()}\n${digest}\n`;
    const sig = createHmac("sha256", Buffer.from(key, "base64")).update(text).digest("base64");
    const res = await fetch(new URL(path, endpoint), {
      method,
      headers: {
        authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`),
        "x-ms-date": date,
        "content-type": "application/json",
      },
      body: body === undefined ? undefined : payload,
    });
    const answer = await res.text();
    if (!res.ok) throw new AdminError(`${method} ${path} answered ${res.status}: ${answer.slice(0, 300)}`);
    return answer ? JSON.parse(answer) : undefined;
  };
}
