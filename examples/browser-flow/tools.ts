import { z } from "zod";
import type { Page } from "playwright-core";
import { tool, type AnyTool, type ToolContext } from "../../src/engine/tool.js";
import { browserResourceName, type BrowserSession } from "./browser-session.js";
import type { FormSite } from "./form-site.js";

const actionTimeoutMs = 15_000;

function pageOf(ctx: ToolContext): Page {
  return ctx.resource<BrowserSession>(browserResourceName).page;
}

/** The page's address relative to the site, as the model sees it. */
function where(page: Page, base: string): string {
  const url = page.url();
  return url.startsWith(base) ? url.slice(base.length) || "/" : url;
}

async function resolveUrl(site: FormSite, url: string): Promise<string> {
  const base = await site.start();
  const target = new URL(url, base);
  if (target.origin !== new URL(base).origin) throw new Error(`only the local site ${base} is reachable from this browser, not ${target.origin}`);
  return target.href;
}

interface FormField {
  selector: string;
  name: string;
  label: string;
  type: string;
  required: boolean;
  options?: string[];
}

/** The fields of the forms inside `root`, with their labels: what a person would read off the page. */
function describeFields(root: Element): FormField[] {
  const fields: FormField[] = [];
  for (const element of Array.from(root.querySelectorAll("input, select, textarea"))) {
    const input = element as HTMLInputElement;
    if (input.type === "hidden" || input.type === "submit") continue;
    const label = (input.id ? root.ownerDocument.querySelector(`label[for="${input.id}"]`) : null) ?? input.closest("label");
    const field: FormField = {
      selector: input.id ? `#${input.id}` : `[name="${input.name}"]`,
      name: input.name,
      label: (label?.textContent ?? input.name).trim().replace(/\s+/g, " "),
      type: element.tagName === "SELECT" ? "select" : element.tagName === "TEXTAREA" ? "textarea" : input.type,
      required: input.required,
    };
    if (element.tagName === "SELECT") field.options = Array.from((element as HTMLSelectElement).options).map((o) => o.value);
    fields.push(field);
  }
  return fields;
}

interface SubmitResult {
  submissionId: string;
  url: string;
  title: string;
}

export function browserTools(site: FormSite): AnyTool[] {
  const goto = tool({
    name: "goto",
    description: "Open a page of the site in the browser, by path (e.g. /signup) or full URL.",
    input: z.object({ url: z.string().min(1) }),
    idempotent: true,
    timeoutMs: actionTimeoutMs,
    async execute({ url }, ctx) {
      const page = pageOf(ctx);
      const response = await page.goto(await resolveUrl(site, url), { waitUntil: "domcontentloaded", timeout: actionTimeoutMs });
      const base = await site.start();
      return { url: where(page, base), status: response?.status() ?? 0, title: await page.title(), site: base };
    },
  });

  const read = tool({
    name: "read",
    description: "Read the current page (or the part matching a CSS selector): its text, links and form fields.",
    input: z.object({ selector: z.string().optional() }),
    idempotent: true,
    timeoutMs: actionTimeoutMs,
    async execute({ selector }, ctx) {
      const page = pageOf(ctx);
      const root = page.locator(selector ?? "body").first();
      const text = (await root.innerText({ timeout: actionTimeoutMs })).trim();
      const links = await root.evaluate((element) =>
        Array.from(element.querySelectorAll("a[href]"))
          .slice(0, 10)
          .map((a) => ({ text: (a.textContent ?? "").trim(), href: a.getAttribute("href") ?? "" })),
      );
      const fields = await root.evaluate(describeFields);
      return { url: where(page, await site.start()), title: await page.title(), text: text.length > 1_500 ? `${text.slice(0, 1_497)}...` : text, links, fields };
    },
  });

  const fill = tool({
    name: "fill",
    description: 'Fill a form field found by CSS selector: text is typed, a select picks the option with that value, a checkbox is checked for "true".',
    input: z.object({ selector: z.string().min(1), value: z.string() }),
    idempotent: true,
    timeoutMs: actionTimeoutMs,
    async execute({ selector, value }, ctx) {
      const field = pageOf(ctx).locator(selector).first();
      const kind = await field.evaluate((element) => (element.tagName === "SELECT" ? "select" : (element as HTMLInputElement).type));
      if (kind === "select") await field.selectOption(value, { timeout: actionTimeoutMs });
      else if (kind === "checkbox" || kind === "radio") await field.setChecked(value === "true", { timeout: actionTimeoutMs });
      else await field.fill(value, { timeout: actionTimeoutMs });
      return { selector, value, kind };
    },
  });

  const click = tool({
    name: "click",
    description: "Click a link or button found by CSS selector and wait for the page to settle. Use submit to send a form.",
    input: z.object({ selector: z.string().min(1) }),
    idempotent: true,
    timeoutMs: actionTimeoutMs,
    async execute({ selector }, ctx) {
      const page = pageOf(ctx);
      await page.locator(selector).first().click({ timeout: actionTimeoutMs });
      await page.waitForLoadState("domcontentloaded", { timeout: actionTimeoutMs });
      return { url: where(page, await site.start()), title: await page.title() };
    },
  });

  const submit = tool<{ form: string }, SubmitResult>({
    name: "submit",
    description: "Submit a form found by CSS selector, as a person pressing its submit button would. The site records the request; a cancel withdraws it.",
    input: z.object({ form: z.string().min(1) }),
    timeoutMs: actionTimeoutMs,
    async execute({ form }, ctx) {
      const page = pageOf(ctx);
      const base = await site.start();
      const target = page.locator(form).first();
      // The key rides along in a hidden field, so the site can deduplicate and `check` can ask it later.
      await target.evaluate((element, key) => {
        const formElement = element as HTMLFormElement;
        let input = formElement.querySelector<HTMLInputElement>('input[name="idempotency_key"]');
        if (!input) {
          input = formElement.ownerDocument.createElement("input");
          input.type = "hidden";
          input.name = "idempotency_key";
          formElement.appendChild(input);
        }
        input.value = key;
      }, ctx.idempotencyKey);
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/api/submissions", { timeout: actionTimeoutMs }),
        target.locator('[type="submit"]').first().click({ timeout: actionTimeoutMs }),
      ]);
      const submissionId = response.headers()["x-submission-id"];
      if (!submissionId) throw new Error(`the site refused the form (HTTP ${response.status()}): ${await response.text().catch(() => "")}`);
      await page.waitForLoadState("domcontentloaded", { timeout: actionTimeoutMs });
      return { submissionId, url: where(page, base), title: await page.title() };
    },
    async check(key) {
      const base = await site.start();
      const found = (await (await fetch(`${base}/api/submissions?key=${encodeURIComponent(key)}`)).json()) as { submissions: { id: string }[] };
      const submission = found.submissions[0];
      return submission ? { done: true, result: { submissionId: submission.id, url: `/thanks?id=${submission.id}`, title: "" } } : { done: false };
    },
    async compensate(_input, result, ctx) {
      const base = await site.start();
      const response = await fetch(`${base}/api/submissions/${encodeURIComponent(result.submissionId)}`, { method: "DELETE", signal: ctx.signal });
      // 404: the site no longer has it, which is what the undo wants.
      if (!response.ok && response.status !== 404) throw new Error(`the site refused to withdraw ${result.submissionId}: HTTP ${response.status}`);
    },
  });

  return [goto, read, fill, click, submit];
}
