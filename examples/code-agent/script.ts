import type { SimulatedScript, SimulatedTurn } from "../../src/models/simulated-model.js";
import { field, newSteering, taskOf, text, toolExchanges, type ToolExchange } from "../shared/conversation.js";

/** One change the agent wants to make: the new content from the file as it read it, or null if nothing to do. */
interface PlannedEdit {
  path: string;
  why: string;
  change(content: string, task: string): string | null;
}

const edits: PlannedEdit[] = [
  {
    path: "src/range.js",
    why: "the loop stops at `i < end`, so `end` is never included although the doc comment promises both ends",
    change: (content) => (content.includes("i < end") ? content.replace("i < end", "i <= end") : null),
  },
  {
    path: "test/range.test.js",
    why: "a regression test for a range of one element, the smallest case the off-by-one broke",
    change: (content) =>
      content.includes("single-element")
        ? null
        : `${content.trimEnd()}\n\ntest("a single-element range includes its only value", () => {\n  assert.deepEqual(range(5, 5), [5]);\n  assert.equal(rangeLength(5, 5), 1);\n});\n`,
  },
  {
    path: "CHANGELOG.md",
    why: "the fix is user-visible, so it belongs in the changelog",
    change: (content) => {
      const entry = "- Fix: `range(start, end)` includes `end`, as documented.";
      if (content.includes(entry)) return null;
      if (content.includes("## Unreleased\n")) return content.replace("## Unreleased\n", `## Unreleased\n${entry}\n`);
      return content.replace(/^(# Changelog\n\n?)/, `$1## Unreleased\n${entry}\n\n`);
    },
  },
];

function testSummary(exchange: ToolExchange): string {
  const out = exchange.output;
  const failures = field(out, "failures");
  const failing = Array.isArray(failures) && failures.length ? ` Failing: ${failures.map((f) => `"${String(f)}"`).join(", ")}.` : "";
  return `${String(field(out, "passed"))} of ${String(field(out, "total"))} tests pass.${failing}`;
}

function acknowledge(notes: readonly string[]): string {
  return notes.length ? `Noted: ${notes.map((n) => `"${n}"`).join("; ")}.\n\n` : "";
}

/**
 * The code-agent trace: look around, read the code, reproduce the failure, then for each fix
 * write a draft and apply it, and run the tests again. Decided from the conversation alone.
 */
export const codeAgentScript: SimulatedScript = ({ request }): SimulatedTurn => {
  const messages = request.messages;
  const task = taskOf(messages);
  const said = acknowledge(newSteering(messages));
  const done = toolExchanges(messages).filter((e) => e.done);
  const last = done[done.length - 1];
  if (last && !last.ok && (last.toolName === "write_draft" || last.toolName === "apply_draft")) {
    return { text: `${said}Stopping: ${last.toolName} on ${text(field(last.input, "path"))} failed (${text(field(last.output, "message"))}). The workspace needs a person's look before I continue.` };
  }

  const listing = done.find((e) => e.toolName === "list_files" && e.ok);
  if (!listing) {
    return {
      text:
        `${said}Task: ${task}\n\nPlan:\n1. Look at the workspace and read the code and its tests.\n2. Run the tests to reproduce the failure.\n` +
        `3. Fix the code, add a regression test and a changelog entry, each as a draft that I then apply.\n4. Run the tests again.`,
      toolCalls: [{ toolName: "list_files", input: {} }],
    };
  }

  const files = new Set((field(listing.output, "files") as { path: string }[] | undefined ?? []).map((f) => f.path));
  const reads = new Map(done.filter((e) => e.toolName === "read_file" && e.ok).map((e) => [text(field(e.input, "path")), text(field(e.output, "content"))]));
  const toRead = edits.map((e) => e.path).filter((path) => files.has(path) && !reads.has(path));
  if (toRead.length) {
    return {
      text: `${said}The workspace has ${files.size} files. Reading ${toRead.join(", ")}.`,
      toolCalls: toRead.map((path) => ({ toolName: "read_file", input: { path } })),
    };
  }

  const testRuns = done.filter((e) => e.toolName === "run_tests" && e.ok);
  const applies = done.filter((e) => e.toolName === "apply_draft" && e.ok);
  if (testRuns.length === 0) {
    return {
      text: `${said}\`range\` documents that both ends are included, but the loop condition is \`i < end\`. Running the tests to confirm before I change anything.`,
      toolCalls: [{ toolName: "run_tests", input: {} }],
    };
  }

  for (const edit of edits) {
    const content = reads.get(edit.path);
    const next = content === undefined ? null : edit.change(content, task);
    if (next === null) continue;
    const draft = done.find((e) => e.toolName === "write_draft" && e.ok && text(field(e.input, "path")) === edit.path);
    if (!draft) {
      const before = testRuns.length === 1 && applies.length === 0 ? `Reproduced: ${testSummary(testRuns[0])}\n\n` : "";
      return {
        text: `${said}${before}Drafting ${edit.path}: ${edit.why}.`,
        toolCalls: [{ toolName: "write_draft", input: { path: edit.path, content: next } }],
      };
    }
    if (!applies.some((e) => text(field(e.input, "path")) === edit.path)) {
      return {
        text: `${said}The draft of ${edit.path} is ready (${String(field(draft.output, "bytes"))} bytes). Applying it.`,
        toolCalls: [{ toolName: "apply_draft", input: { path: edit.path } }],
      };
    }
  }

  const lastApply = applies[applies.length - 1];
  const lastRun = testRuns[testRuns.length - 1];
  if (lastApply && lastRun.turnIndex < lastApply.turnIndex) {
    return { text: `${said}All edits are applied. Running the tests again.`, toolCalls: [{ toolName: "run_tests", input: {} }] };
  }

  const changed = applies.map((e) => {
    const lines = Number(field(e.output, "linesChanged"));
    return `${text(field(e.input, "path"))} (${lines} line${lines === 1 ? "" : "s"})`;
  });
  return {
    text: changed.length
      ? `${said}Done. Changed ${changed.join(", ")}. ${testSummary(lastRun)}`
      : `${said}Nothing to change: the code already does what the task asks. ${testSummary(lastRun)}`,
  };
};
