import type { Json } from "../../src/engine/json.js";
import type { SimulatedScript, SimulatedTurn } from "../../src/models/simulated-model.js";
import { field, newSteering, taskOf, text, toolExchanges, type ToolExchange } from "../shared/conversation.js";

export interface RequestDetails {
  name: string;
  email: string;
  company: string;
  plan: string;
  message: string;
}

/** Who the request is for, read off the task ("... for Ada Lovelace (ada@example.com) from Analytical Engines, team plan"). */
export function requestDetails(task: string): RequestDetails {
  const email = /[\w.+-]+@[\w-]+(\.[\w-]+)+/.exec(task)?.[0] ?? "ada@example.com";
  const name = /\bfor ([A-Z][\w'-]+(?: [A-Z][\w'-]+)+)/.exec(task)?.[1] ?? "Ada Lovelace";
  const company = /\b(?:from|at) ([A-Z][\w&.'-]*(?: [A-Z][\w&.'-]*)*)/.exec(task)?.[1] ?? "Analytical Engines Ltd";
  const plan = /\b(starter|team|enterprise)\b/i.exec(task)?.[1]?.toLowerCase() ?? "team";
  return { name, email, company, plan, message: `A walkthrough of the ${plan} plan for ${company}, please.` };
}

interface FieldView {
  selector: string;
  name: string;
  label: string;
  type: string;
}

function valueFor(fieldView: FieldView, details: RequestDetails): string | undefined {
  if (fieldView.type === "checkbox") return "true";
  const known: Record<string, string> = { name: details.name, email: details.email, company: details.company, plan: details.plan, message: details.message };
  return known[fieldView.name];
}

function fieldsOf(exchange: ToolExchange | undefined): FieldView[] {
  const fields = exchange ? field(exchange.output, "fields") : undefined;
  return Array.isArray(fields) ? (fields as unknown as FieldView[]) : [];
}

function acknowledge(notes: readonly string[]): string {
  return notes.length ? `Noted: ${notes.map((n) => `"${n}"`).join("; ")}.\n\n` : "";
}

const navigation = new Set(["goto", "click"]);

/**
 * The browser-flow trace: open the site, find the demo-request form, fill it in from the task,
 * submit it, read the confirmation. It looks only at what happened since the last page load, so
 * a fresh browser after a crash (an error from a page action) sends it back to the form.
 */
export const browserFlowScript: SimulatedScript = ({ request }): SimulatedTurn => {
  const messages = request.messages;
  const details = requestDetails(taskOf(messages));
  const said = acknowledge(newSteering(messages));
  const done = toolExchanges(messages).filter((e) => e.done);
  const after = (turn: number) => done.filter((e) => e.turnIndex > turn);

  const submitted = done.filter((e) => e.toolName === "submit" && e.ok).pop();
  if (submitted) {
    const confirmation = after(submitted.turnIndex).find((e) => e.toolName === "read" && e.ok);
    const id = text(field(submitted.output, "submissionId"));
    if (!confirmation) {
      return { text: `${said}The site accepted the form as request ${id}. Reading the confirmation page.`, toolCalls: [{ toolName: "read", input: { selector: "main" } }] };
    }
    const says = text(field(confirmation.output, "text")).split(/\n\s*\n/)[0];
    return { text: `${said}Done. The demo request for ${details.name} <${details.email}> is in as request ${id}. The site says: "${says}"` };
  }

  const lastLoad = done.filter((e) => navigation.has(e.toolName) && e.ok).pop();
  if (!lastLoad) {
    return {
      text:
        `${said}Plan:\n1. Open the site and find the demo request form.\n2. Read the form and fill in every field for ${details.name} (${details.email}, ${details.company}, ${details.plan} plan).\n` +
        `3. Submit it once, then read the confirmation.`,
      toolCalls: [{ toolName: "goto", input: { url: "/" } }],
    };
  }

  const since = after(lastLoad.turnIndex);
  const failure = since.find((e) => !e.ok);
  if (failure) {
    return {
      text: `${said}The page is not what I expected (${failure.toolName} failed: ${text(field(failure.output, "message"))}). Opening the form again.`,
      toolCalls: [{ toolName: "goto", input: { url: "/signup" } }],
    };
  }

  const onForm = text(field(lastLoad.output, "url")).startsWith("/signup");
  const pageRead = since.find((e) => e.toolName === "read" && e.ok);
  if (!onForm) {
    if (!pageRead) return { text: `${said}The home page is open. Reading it to find the way to the form.`, toolCalls: [{ toolName: "read", input: {} }] };
    const links = field(pageRead.output, "links");
    const link = (Array.isArray(links) ? links : []).map((l) => ({ text: text(field(l, "text")), href: text(field(l, "href")) })).find((l) => /demo|sign ?up/i.test(l.text));
    if (link) return { text: `${said}Found the link "${link.text}". Following it.`, toolCalls: [{ toolName: "click", input: { selector: `a[href="${link.href}"]` } }] };
    return { text: `${said}No link to the form on this page; going to /signup directly.`, toolCalls: [{ toolName: "goto", input: { url: "/signup" } }] };
  }

  if (!pageRead) return { text: `${said}On the form page. Reading the form's fields.`, toolCalls: [{ toolName: "read", input: { selector: "form" } }] };
  const fields = fieldsOf(pageRead);
  const filled = new Set(since.filter((e) => e.toolName === "fill" && e.ok).map((e) => text(field(e.input, "selector"))));
  const toFill = fields.filter((f) => !filled.has(f.selector) && valueFor(f, details) !== undefined);
  if (toFill.length) {
    return {
      text: `${said}The form asks for: ${fields.map((f) => f.label).join("; ")}. Filling in ${toFill.length === fields.length ? "all of them" : toFill.map((f) => f.name).join(", ")}.`,
      toolCalls: toFill.map((f) => ({ toolName: "fill", input: { selector: f.selector, value: valueFor(f, details) ?? "" } as Json })),
    };
  }
  return {
    text: `${said}Every field is filled in (${fields.map((f) => `${f.name}: ${f.type === "checkbox" ? "checked" : JSON.stringify(valueFor(f, details))}`).join(", ")}). Submitting the form.`,
    toolCalls: [{ toolName: "submit", input: { form: "form#demo-request" } }],
  };
};
