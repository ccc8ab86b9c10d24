import { Option } from "commander";
import type { Runtime } from "../engine/runtime.js";
import { parseWebhooks } from "../notify/webhook-config.js";
import { startWebhookNotifier, type WebhookNotifier } from "../notify/webhooks.js";
import { UsageError } from "./exit-codes.js";

/** `--webhook` on the commands that execute runs (serve, worker): the process that writes a pause tells people. */
export interface WebhookFlags {
  webhook?: string[];
  publicUrl?: string;
}

export interface WebhookSettings {
  urls: string[];
  secret: string;
  publicUrl: string | undefined;
}

export function webhookOption(): Option {
  return new Option("--webhook <url>", "POST a signed notice here when a run starts waiting for a person (repeatable; signed with TETHER_WEBHOOK_SECRET; docs/webhooks.md)").argParser(
    (url: string, previous: string[] | undefined) => [...(previous ?? []), url],
  );
}

export function publicUrlOption(): Option {
  return new Option("--public-url <url>", "the address people reach the server at, for the links in webhook notices").env("TETHER_PUBLIC_URL");
}

/** The webhooks the flags ask for, checked before anything starts; undefined without `--webhook`. */
export function webhookSettings(flags: WebhookFlags, env: NodeJS.ProcessEnv = process.env): WebhookSettings | undefined {
  const urls = flags.webhook ?? [];
  if (!urls.length) return undefined;
  const secret = env.TETHER_WEBHOOK_SECRET;
  if (!secret) throw new UsageError("--webhook needs the shared secret that signs each notice: set TETHER_WEBHOOK_SECRET (e.g. export TETHER_WEBHOOK_SECRET=$(openssl rand -hex 32))");
  parseWebhooks(urls.map((url) => ({ url, secret })));
  return { urls, secret, publicUrl: flags.publicUrl };
}

/** Starts the notifier on the runtime; links point at `--public-url`, else at `fallbackUrl`. */
export function startWebhooks(runtime: Runtime, settings: WebhookSettings, fallbackUrl: string): WebhookNotifier {
  return startWebhookNotifier(runtime, { webhooks: settings.urls.map((url) => ({ url, secret: settings.secret })), publicUrl: settings.publicUrl ?? fallbackUrl });
}

export function describeWebhooks(settings: WebhookSettings): string {
  return `webhooks: ${settings.urls.map((url) => new URL(url).origin).join(", ")} (runs waiting for a person)`;
}
