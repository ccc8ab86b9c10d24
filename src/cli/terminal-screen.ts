/**
 * A log that scrolls, with a few live lines pinned below it (streamed text in progress, a
 * notice or question, the status line). Live lines are cut to the terminal width so erasing
 * them is exact.
 */
export class TerminalScreen {
  private drawnRows = 0;
  private partial = "";
  private notice = "";
  private status = "";

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly textPrefix = "      │ ",
  ) {}

  private get width(): number {
    return Math.max(20, (this.out.columns || 80) - 1);
  }

  private fit(line: string): string {
    // eslint-disable-next-line no-control-regex
    const plain = line.replace(/\x1b\[[0-9;]*m/g, "");
    return plain.length > this.width ? `${plain.slice(0, this.width - 1)}…` : line;
  }

  private erase(): string {
    if (this.drawnRows === 0) return "\r\x1b[J";
    return `\r${this.drawnRows > 1 ? `\x1b[${this.drawnRows - 1}A` : ""}\x1b[J`;
  }

  private draw(): string {
    const rows: string[] = [];
    if (this.partial) rows.push(this.fit(this.textPrefix + this.partial));
    if (this.notice) rows.push(this.fit(this.notice));
    rows.push(this.fit(this.status));
    this.drawnRows = rows.length;
    return rows.join("\n");
  }

  private paint(committed: string[]): void {
    this.out.write(this.erase() + committed.map((l) => `${l}\n`).join("") + this.draw());
  }

  /** Lines that scroll up into the log. */
  log(...lines: string[]): void {
    const committed = this.partial ? [this.textPrefix + this.partial, ...lines] : lines;
    this.partial = "";
    this.paint(committed);
  }

  /** Streamed model text: whole lines scroll up, the rest stays live until it wraps or ends. */
  text(chunk: string): void {
    const committed: string[] = [];
    const parts = (this.partial + chunk).split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) committed.push(this.textPrefix + line);
    const room = this.width - this.textPrefix.length;
    while (this.partial.length > room) {
      const cut = this.partial.lastIndexOf(" ", room) > room / 2 ? this.partial.lastIndexOf(" ", room) : room;
      committed.push(this.textPrefix + this.partial.slice(0, cut));
      this.partial = this.partial.slice(cut).trimStart();
    }
    this.paint(committed);
  }

  setNotice(notice: string): void {
    this.notice = notice;
    this.paint([]);
  }

  setStatus(status: string): void {
    if (status === this.status) return;
    this.status = status;
    this.paint([]);
  }

  /** Leaves the live lines on screen as the last lines of output. */
  finish(): void {
    this.out.write(`${this.erase()}${this.partial ? `${this.textPrefix}${this.partial}\n` : ""}${this.notice ? `${this.notice}\n` : ""}${this.status}\n`);
    this.drawnRows = 0;
    this.partial = "";
  }
}
