import { describe, expect, it } from "vitest";
import { TetherError } from "../engine/errors.js";
import { storeLocation } from "./open-store.js";

function refusal(databaseUrl: string): string {
  try {
    storeLocation({ databaseUrl });
  } catch (error) {
    expect(TetherError.isInstance(error, "invalid_input")).toBe(true);
    return (error as Error).message;
  }
  throw new Error(`${databaseUrl} was accepted`);
}

describe("storeLocation", () => {
  it("reads the schema from ?schema= and defaults it to tether", () => {
    expect(storeLocation({ databaseUrl: "postgres://u@db:5432/app?schema=agents" })).toMatchObject({ kind: "postgres", schema: "agents" });
    expect(storeLocation({ databaseUrl: "postgresql://u@db/app" })).toMatchObject({ kind: "postgres", schema: "tether" });
  });

  it("says when a URL's port is out of range, rather than that it is not a URL", () => {
    expect(refusal("postgres://postgres@127.0.0.1:99999/x")).toBe("the database URL's port 99999 is out of range (1-65535): expected postgres://user@host:5432/database");
    expect(refusal("not a url")).toBe("the database URL is not a URL: expected postgres://user@host:5432/database");
  });
});
