import { createHash } from "node:crypto";
import { InvalidInputError } from "../engine/errors.js";
import { budgetCodePrefix, personWaitCodes, type PersonWaitReason } from "../engine/waiting.js";

export interface WebhookConfig {
  /** Where to POST. Often secret itself (a Slack hook): it is never journaled, only its origin. */
  url: string;
  /** The shared secret that signs each request (at least 16 characters; e.g. `openssl rand -hex 32`). */
  secret: string;
  /**
   * The wait reasons this webhook is told about, e.g. `["approval_required", "budget_*"]`
   * (`budget_*`: every budget). Default: all of them.
   */
  events?: readonly string[];
  /** Names it in the journal. Default `wh_` and the first 12 hex digits of the URL's SHA-256. */
  name?: string;
}

export interface Webhook {
  /** Stable across restarts: deliveries are deduplicated by it. */
  id: string;
  url: string;
  /** The URL's origin, what the journal shows of it. */
  target: string;
  secret: string;
  wants(reason: PersonWaitReason): boolean;
}

const knownEvents = [...personWaitCodes, "budget_*"];

/** Checks the configuration and says what to fix; the secret never appears in a message. */
export function parseWebhooks(configs: readonly WebhookConfig[]): Webhook[] {
  if (!Array.isArray(configs)) throw new InvalidInputError("webhooks must be a list of { url, secret, events? }");
  const seen = new Set<string>();
  return configs.map((config, index) => {
    const where = `webhooks[${index}]`;
    let url: URL;
    try {
      url = new URL(config.url);
    } catch {
      throw new InvalidInputError(`${where}.url must be an absolute http(s) URL, e.g. https://hooks.example.com/tether`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new InvalidInputError(`${where}.url must use http or https (got ${url.protocol})`);
    if (typeof config.secret !== "string" || config.secret.length < 16) {
      throw new InvalidInputError(`${where}.secret must be a shared secret of at least 16 characters (e.g. the output of \`openssl rand -hex 32\`)`);
    }
    const events = config.events ?? knownEvents;
    for (const event of events) {
      if (!knownEvents.includes(event) && !(event.startsWith(budgetCodePrefix) && /^[a-z_]+$/.test(event))) {
        throw new InvalidInputError(`${where}.events has an unknown reason "${event}" (known: ${knownEvents.join(", ")}, or one budget such as budget_steps)`);
      }
    }
    const id = config.name ?? `wh_${createHash("sha256").update(url.href).digest("hex").slice(0, 12)}`;
    if (!/^[\w.-]{1,64}$/.test(id)) throw new InvalidInputError(`${where}.name must be 1-64 letters, digits, "_", "." or "-"`);
    if (seen.has(id)) throw new InvalidInputError(`${where} repeats webhook ${id}: give each webhook its own url or name`);
    seen.add(id);
    return {
      id,
      url: url.href,
      target: url.origin,
      secret: config.secret,
      wants: (reason) => events.includes(reason) || (reason.startsWith(budgetCodePrefix) && events.includes("budget_*")),
    };
  });
}
