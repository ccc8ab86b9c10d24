import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signWebhookBody, verifyWebhookSignature } from "./webhook-signature.js";

const secret = "whsec_0123456789abcdef0123456789abcdef";
const body = '{"id":"run_1.7","type":"run.waiting"}';
const at = 1_767_225_600; // 2026-01-01T00:00:00Z, in seconds
const now = at * 1000 + 30_000;

describe("webhook signatures", () => {
  it("is HMAC-SHA256 over `<t>.<body>` with the shared secret, as the docs tell a receiver to compute it", () => {
    const expected = createHmac("sha256", secret).update(`${at}.${body}`).digest("hex");
    expect(signWebhookBody(secret, body, at)).toBe(`t=${at},v1=${expected}`);
  });

  it("verifies the body it signed, and nothing else", () => {
    const header = signWebhookBody(secret, body, at);
    expect(verifyWebhookSignature({ body, header, secret, now })).toEqual({ valid: true, timestamp: at });
    expect(verifyWebhookSignature({ body: Buffer.from(body), header, secret, now }).valid).toBe(true);
    expect(verifyWebhookSignature({ body: body.replace("7", "8"), header, secret, now })).toEqual({ valid: false, reason: "no signature matches the body and the secret" });
    expect(verifyWebhookSignature({ body, header, secret: `${secret}x`, now }).valid).toBe(false);
    // The timestamp is signed: moving it breaks the signature.
    expect(verifyWebhookSignature({ body, header: header.replace(`t=${at}`, `t=${at + 1}`), secret, now }).valid).toBe(false);
  });

  it("refuses an old or future timestamp beyond the tolerance (a replayed request)", () => {
    const header = signWebhookBody(secret, body, at);
    expect(verifyWebhookSignature({ body, header, secret, now: now + 600_000 })).toEqual({ valid: false, reason: "the timestamp is 630 s away from now (tolerance 300 s)" });
    expect(verifyWebhookSignature({ body, header, secret, now: at * 1000 - 400_000 }).valid).toBe(false);
    expect(verifyWebhookSignature({ body, header, secret, now: now + 600_000, toleranceSeconds: 3600 }).valid).toBe(true);
  });

  it("accepts any of several v1 signatures (a secret being rotated), and says what is missing", () => {
    const other = signWebhookBody("whsec_the_old_secret_000000000000", body, at).split(",")[1];
    const header = `${signWebhookBody(secret, body, at)},${other}`;
    expect(verifyWebhookSignature({ body, header, secret, now }).valid).toBe(true);
    expect(verifyWebhookSignature({ body, header, secret: "whsec_the_old_secret_000000000000", now }).valid).toBe(true);
    expect(verifyWebhookSignature({ body, header: undefined, secret, now })).toEqual({ valid: false, reason: "no Tether-Signature header" });
    expect(verifyWebhookSignature({ body, header: "v1=abc", secret, now })).toEqual({ valid: false, reason: "the header has no timestamp (t=<unix seconds>)" });
    expect(verifyWebhookSignature({ body, header: `t=${at}`, secret, now })).toEqual({ valid: false, reason: "the header has no v1 signature" });
    expect(verifyWebhookSignature({ body, header: `t=${at},v1=not-hex`, secret, now }).valid).toBe(false);
  });
});
