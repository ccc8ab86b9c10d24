import { describe, expect, it } from "vitest";
import { SecretRedactor } from "./secrets.js";

describe("SecretRedactor", () => {
  it("takes the values of environment variables named like secrets, and nothing short", () => {
    const redactor = SecretRedactor.fromEnvironment({ OPENAI_API_KEY: "sk-live-0123456789", TETHER_TOKEN: "tether_abcdefgh", WEBHOOK_SECRET: "s3cr3t-value", DB_PASSWORD: "hunter2hunter2", HOME: "/root/somewhere", SHORT_KEY: "abc", TETHER_URL: "http://127.0.0.1:4317" });
    expect(redactor.text("keys sk-live-0123456789 tether_abcdefgh s3cr3t-value hunter2hunter2 abc /root/somewhere http://127.0.0.1:4317")).toBe(
      "keys [redacted] [redacted] [redacted] [redacted] abc /root/somewhere http://127.0.0.1:4317",
    );
  });

  it("replaces a secret that contains another whole, and walks JSON without copying what has no secret", () => {
    const redactor = new SecretRedactor(["abcdefgh", "abcdefgh-longer"]);
    expect(redactor.text("x abcdefgh-longer y abcdefgh")).toBe("x [redacted] y [redacted]");
    const clean = { a: [1, "plain", { b: null }] };
    expect(redactor.json(clean)).toBe(clean);
    expect(redactor.json({ a: [1, "has abcdefgh", { b: "abcdefgh-longer" }], c: "ok" })).toEqual({ a: [1, "has [redacted]", { b: "[redacted]" }], c: "ok" });
  });
});
