import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { exampleAsset } from "../shared/package-root.js";

export interface Submission {
  id: string;
  /** The idempotency key the form carried (hidden field `idempotency_key`): a repeat returns the first submission. */
  key: string | null;
  fields: Record<string, string>;
  receivedAt: string;
  withdrawnAt: string | null;
}

export interface FormSiteOptions {
  /** Where submissions are kept, so they outlive the process that received them. */
  dataFile: string;
  /** The static pages. Default: `examples/browser-flow/site`. */
  siteDir?: string;
  /** Default 0: any free port. */
  port?: number;
}

const pages: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/signup": { file: "signup.html", type: "text/html; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};

function escapeHtml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    request.setEncoding("utf8");
    request.on("data", (chunk: string) => {
      body += chunk;
      if (body.length > 64 * 1024) reject(new Error("request body too large"));
    });
    request.on("end", () => resolve(body));
    request.on("error", reject);
  });
}

function json(response: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(value));
}

/**
 * The world the browser-flow agent acts on: a tiny site with a demo-request form. The form posts
 * to `POST /api/submissions`; `DELETE /api/submissions/:id` withdraws a request, which is how a
 * cancelled run takes its submission back. Submissions are kept in a JSON file.
 */
export class FormSite {
  private server: Server | undefined;
  private starting: Promise<string> | undefined;
  private base: string | undefined;
  private readonly siteDir: string;

  constructor(private readonly options: FormSiteOptions) {
    this.siteDir = options.siteDir ?? exampleAsset("browser-flow", "site");
  }

  /** Starts the site once (later calls return the same address) and returns its base URL. */
  start(): Promise<string> {
    this.starting ??= new Promise<string>((resolve, reject) => {
      const server = createServer((request, response) => {
        this.handle(request, response).catch((error: unknown) => {
          if (!response.headersSent) json(response, 500, { error: { code: "internal_error", message: String(error) } });
          else response.destroy();
        });
      });
      server.once("error", reject);
      server.listen(this.options.port ?? 0, "127.0.0.1", () => {
        server.unref();
        this.server = server;
        this.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        resolve(this.base);
      });
    });
    return this.starting;
  }

  get url(): string | undefined {
    return this.base;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.starting = undefined;
    this.base = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** What the site holds, read from its file. Withdrawn requests only with `includeWithdrawn`. */
  submissions(options: { includeWithdrawn?: boolean } = {}): Submission[] {
    const all = this.load();
    return options.includeWithdrawn ? all : all.filter((s) => s.withdrawnAt === null);
  }

  private load(): Submission[] {
    try {
      return JSON.parse(readFileSync(this.options.dataFile, "utf8")) as Submission[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
  }

  private save(submissions: Submission[]): void {
    mkdirSync(dirname(this.options.dataFile), { recursive: true });
    const temporary = `${this.options.dataFile}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(submissions, null, 2)}\n`);
    renameSync(temporary, this.options.dataFile);
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://localhost");
    const method = request.method ?? "GET";
    const page = pages[url.pathname];
    if (method === "GET" && page) {
      response.writeHead(200, { "content-type": page.type });
      response.end(readFileSync(join(this.siteDir, page.file)));
      return;
    }
    if (method === "GET" && url.pathname === "/thanks") return this.thanks(url.searchParams.get("id") ?? "", response);
    if (url.pathname === "/api/submissions") {
      if (method === "POST") return this.receive(request, response);
      if (method === "GET") {
        const key = url.searchParams.get("key");
        const listed = this.submissions({ includeWithdrawn: url.searchParams.get("all") === "1" }).filter((s) => key === null || s.key === key);
        return json(response, 200, { submissions: listed });
      }
    }
    const match = /^\/api\/submissions\/([\w-]+)$/.exec(url.pathname);
    if (match && method === "GET") {
      const found = this.load().find((s) => s.id === match[1]);
      return found ? json(response, 200, found) : json(response, 404, { error: { code: "not_found", message: `no submission ${match[1]}` } });
    }
    if (match && method === "DELETE") return this.withdraw(match[1], response);
    json(response, 404, { error: { code: "not_found", message: `${method} ${url.pathname} is not a page or an endpoint of this site` } });
  }

  private async receive(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readBody(request);
    const isJson = (request.headers["content-type"] ?? "").includes("application/json");
    const fields: Record<string, string> = isJson ? (JSON.parse(body || "{}") as Record<string, string>) : Object.fromEntries(new URLSearchParams(body));
    const key = fields.idempotency_key || null;
    delete fields.idempotency_key;
    const submissions = this.load();
    let submission = key === null ? undefined : submissions.find((s) => s.key === key && s.withdrawnAt === null);
    if (!submission) {
      const missing = ["name", "email"].filter((name) => !fields[name]?.trim());
      if (missing.length) return json(response, 400, { error: { code: "invalid_input", message: `missing ${missing.join(", ")}` } });
      submission = { id: `S-${String(submissions.length + 1).padStart(4, "0")}`, key, fields, receivedAt: new Date().toISOString(), withdrawnAt: null };
      this.save([...submissions, submission]);
    }
    const headers = { "x-submission-id": submission.id };
    if (isJson) return json(response, 201, submission, headers);
    response.writeHead(303, { ...headers, location: `/thanks?id=${encodeURIComponent(submission.id)}` });
    response.end();
  }

  private thanks(id: string, response: ServerResponse): void {
    const submission = this.load().find((s) => s.id === id);
    if (!submission) return json(response, 404, { error: { code: "not_found", message: `no submission ${id}` } });
    const values: Record<string, string> = { id: submission.id, name: "", email: "", plan: "", ...submission.fields };
    const html = readFileSync(join(this.siteDir, "thanks.html"), "utf8").replace(/\{\{(\w+)\}\}/g, (_, name: string) => escapeHtml(values[name] ?? ""));
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(html);
  }

  private withdraw(id: string, response: ServerResponse): void {
    const submissions = this.load();
    const found = submissions.find((s) => s.id === id);
    if (!found) return json(response, 404, { error: { code: "not_found", message: `no submission ${id}` } });
    if (found.withdrawnAt === null) this.save(submissions.map((s) => (s.id === id ? { ...s, withdrawnAt: new Date().toISOString() } : s)));
    json(response, 200, { id, withdrawn: true });
  }
}
