import type { ModelCallOptions, ModelRequest, ModelStreamPart, TetherModel } from "../engine/model.js";

/**
 * A model for pause tests: it streams `text` as deltas, then keeps the call open until its signal
 * aborts (it never finishes on its own), and counts what it sent in `sent`.
 */
export class TalkingModel implements TetherModel {
  readonly specificationVersion = "tether-model-v1";
  readonly provider = "test";
  readonly modelId = "talking";
  sent = "";

  constructor(
    private readonly text: string,
    private readonly chunk = 50,
  ) {}

  async *stream(_request: ModelRequest, options: ModelCallOptions): AsyncGenerator<ModelStreamPart> {
    yield { type: "usage", usage: { inputTokens: 10, outputTokens: 0 } };
    for (let i = 0; i < this.text.length; i += this.chunk) {
      if (options.signal.aborted) throw options.signal.reason;
      const part = this.text.slice(i, i + this.chunk);
      this.sent += part;
      yield { type: "text-delta", text: part };
      await new Promise((resolve) => setImmediate(resolve));
    }
    await new Promise<void>((_resolve, reject) => {
      if (options.signal.aborted) return reject(options.signal.reason);
      options.signal.addEventListener("abort", () => reject(options.signal.reason), { once: true });
    });
  }
}
