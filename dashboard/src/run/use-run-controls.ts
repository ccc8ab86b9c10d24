import { useCallback, useState } from "preact/hooks";
import { ApiError, errorMessage } from "../api/api-error.js";
import type { Budgets, Json, ResolveAction, RunView } from "../api/types.js";
import { useApp } from "../app-context.js";

export type ResumeProblem = { kind: "stale"; reasons: string[]; message: string; checkedAt?: number } | { kind: "uncertain"; message: string };

export interface ResumeOptions {
  force?: boolean;
  resolve?: ResolveAction | { action: ResolveAction; result?: Json; noResult?: boolean };
  budgets?: Budgets;
}

export interface RunControls {
  busy: "pause" | "resume" | "cancel" | null;
  reason: string;
  setReason(reason: string): void;
  problem: ResumeProblem | null;
  clearProblem(): void;
  pause(): Promise<void>;
  resume(options?: ResumeOptions): Promise<void>;
  cancel(reason: string, inherited?: "compensate" | "keep"): Promise<boolean>;
}

/** Pause, resume and cancel with the shared reason field; a refused resume says why (stale, uncertain). */
export function useRunControls(runId: string, onRun: (run: RunView) => void): RunControls {
  const { client, toast } = useApp();
  const [busy, setBusy] = useState<RunControls["busy"]>(null);
  const [reason, setReason] = useState("");
  const [problem, setProblem] = useState<ResumeProblem | null>(null);

  const pause = useCallback(async () => {
    setBusy("pause");
    try {
      onRun(await client.pause(runId, reason.trim() || undefined));
      setReason("");
    } catch (error) {
      toast(`Pause refused: ${errorMessage(error)}`, "danger");
    } finally {
      setBusy(null);
    }
  }, [client, runId, reason, onRun, toast]);

  const resume = useCallback(
    async (options: ResumeOptions = {}) => {
      setBusy("resume");
      try {
        onRun(await client.resume(runId, { reason: reason.trim() || undefined, ...options }));
        setProblem(null);
        setReason("");
      } catch (error) {
        if (error instanceof ApiError && error.code === "stale_snapshot") {
          const reasons = Array.isArray(error.details?.reasons) ? (error.details.reasons as string[]) : [];
          setProblem({ kind: "stale", reasons, message: error.message });
        } else if (error instanceof ApiError && error.code === "uncertain_effect") {
          setProblem({ kind: "uncertain", message: error.message });
        } else toast(`Resume refused: ${errorMessage(error)}`, "danger");
      } finally {
        setBusy(null);
      }
    },
    [client, runId, reason, onRun, toast],
  );

  const cancel = useCallback(
    async (cancelReason: string, inherited?: "compensate" | "keep") => {
      setBusy("cancel");
      try {
        onRun(await client.cancel(runId, cancelReason.trim() || undefined, inherited));
        setReason("");
        return true;
      } catch (error) {
        toast(`Cancel refused: ${errorMessage(error)}`, "danger");
        return false;
      } finally {
        setBusy(null);
      }
    },
    [client, runId, onRun, toast],
  );

  return { busy, reason, setReason, problem, clearProblem: () => setProblem(null), pause, resume, cancel };
}
