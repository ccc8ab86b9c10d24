import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Webhook signatures, as Stripe signs its events: the header
 * `Tether-Signature: t=<unix seconds>,v1=<hex>` where the hex is HMAC-SHA256, keyed with the
 * shared secret, over `<t>.<raw body>`. The timestamp is signed too, so a receiver that
 * refuses old timestamps refuses a replayed request. See docs/webhooks.md.
 */

export const signatureHeader = "Tether-Signature";

/** Five minutes: what a receiver accepts by default between the signing and its own clock. */
export const defaultToleranceSeconds = 300;

export function signatureOf(secret: string, timestamp: number, body: string | Uint8Array): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/** The header value for `body` signed at `timestamp` (unix seconds). */
export function signWebhookBody(secret: string, body: string | Uint8Array, timestamp: number): string {
  return `t=${timestamp},v1=${signatureOf(secret, timestamp, body)}`;
}

export type WebhookVerification = { valid: true; timestamp: number } | { valid: false; reason: string };

export interface VerifyWebhookOptions {
  /** The request body exactly as received: verify before parsing it. */
  body: string | Uint8Array;
  /** The `Tether-Signature` header. */
  header: string | null | undefined;
  secret: string;
  /** Refuse a signature older or newer than this, against `now`. Default 300 seconds. */
  toleranceSeconds?: number;
  /** Now, in milliseconds. Default `Date.now()`. */
  now?: number;
}

/**
 * For receivers: whether the request is signed with `secret`, within the tolerance. Any `v1`
 * of the header may match (several appear while a secret is being rotated).
 */
export function verifyWebhookSignature(options: VerifyWebhookOptions): WebhookVerification {
  if (!options.header) return { valid: false, reason: `no ${signatureHeader} header` };
  let timestamp: number | undefined;
  const candidates: string[] = [];
  for (const part of options.header.split(",")) {
    const [key, value] = part.trim().split("=", 2);
    if (key === "t" && value && /^\d+$/.test(value)) timestamp = Number(value);
    else if (key === "v1" && value) candidates.push(value);
  }
  if (timestamp === undefined) return { valid: false, reason: "the header has no timestamp (t=<unix seconds>)" };
  if (!candidates.length) return { valid: false, reason: "the header has no v1 signature" };
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  const ageSeconds = Math.abs((options.now ?? Date.now()) / 1000 - timestamp);
  if (ageSeconds > tolerance) return { valid: false, reason: `the timestamp is ${Math.round(ageSeconds)} s away from now (tolerance ${tolerance} s)` };
  const expected = Buffer.from(signatureOf(options.secret, timestamp, options.body), "hex");
  const matches = candidates.some((candidate) => {
    const given = Buffer.from(candidate, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? { valid: true, timestamp } : { valid: false, reason: "no signature matches the body and the secret" };
}
