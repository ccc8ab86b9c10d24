const marker = Symbol.for("tether.client-error");

/** An API error as the server sent it (`{"error":{"code","message"}}`), or `unreachable` (status 0). */
export class TetherClientError extends Error {
  readonly [marker] = true;
  readonly code: string;
  /** The HTTP status; 0 when the server could not be reached. */
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: string, status: number, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TetherClientError";
    this.code = code;
    this.status = status;
    this.details = details;
  }

  /** Survives duplicate copies of the package, unlike `instanceof`. */
  static isInstance(value: unknown): value is TetherClientError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[marker] === true;
  }
}
