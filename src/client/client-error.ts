import { TetherError, type ErrorCode, type ErrorDetails } from "../engine/errors.js";

/**
 * @deprecated The client throws the library's classes (`TetherError` and its subclasses, with
 * `status`); catch those. Kept so code written for 0.1 compiles: `TetherClientError.isInstance`
 * is true of any error the client received, and `new TetherClientError(code, status, message)`
 * still builds one.
 */
export class TetherClientError extends TetherError {
  declare readonly status: number;

  constructor(code: string, status: number, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(code as ErrorCode, message, details as ErrorDetails[ErrorCode], { cause: options?.cause, status });
    this.name = "TetherClientError";
  }

  /** Any Tether error that came through the HTTP client (it has a `status`). */
  static override isInstance<C extends ErrorCode = ErrorCode>(value: unknown, code?: C): value is TetherError<C> & { status: number } {
    return TetherError.isInstance(value, code) && typeof value.status === "number";
  }
}
