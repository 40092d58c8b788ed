/**
 * The event store's typed errors. A `ConcurrencyError` is the optimistic-concurrency outcome of an
 * append: another writer reached the stream first (or the caller's expected version is stale).
 * It maps to 409 `concurrency_conflict`, marked retryable: read the stream again, decide again,
 * resend. Nothing of the rejected append is written.
 */
import { PlatformError } from '../../shared/errors.js';

export class ConcurrencyError extends PlatformError {
  readonly streamId: string;
  readonly expectedVersion: number;
  /** The stream's version when the conflict was noticed, when known. */
  readonly actualVersion: number | undefined;

  constructor(streamId: string, expectedVersion: number, actualVersion?: number, opts: { cause?: unknown } = {}) {
    super('concurrency_conflict', {
      detail:
        actualVersion === undefined
          ? `the record was changed by another writer (expected version ${expectedVersion}); read it again and retry`
          : `the record is at version ${actualVersion}, not ${expectedVersion}; read it again and retry`,
      extra: { retryable: true },
      cause: opts.cause,
    });
    this.name = 'ConcurrencyError';
    this.streamId = streamId;
    this.expectedVersion = expectedVersion;
    this.actualVersion = actualVersion;
  }
}

export function isConcurrencyError(err: unknown): err is ConcurrencyError {
  return err instanceof ConcurrencyError;
}
