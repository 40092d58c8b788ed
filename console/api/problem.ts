/**
 * An error answer from a service's API, as the console keeps it: the problem+json document
 * (RFC 9457) the services send, or one the console makes when a service gave none (unreachable,
 * timed out, answered something else).
 */
export interface ApiProblem {
  readonly type?: string;
  readonly title: string;
  readonly status: number;
  readonly code: string;
  readonly detail?: string;
  /** The request field the problem is about (`invalid_field`): pages show it beside that control. */
  readonly field?: string;
  readonly [extra: string]: unknown;
}

/** A service answered with an error status (or could not be reached). */
export class ApiError extends Error {
  readonly problem: ApiProblem;
  /** Which service: `control-plane`, `notifier`, `identity`. */
  readonly service: string;
  constructor(service: string, problem: ApiProblem) {
    super(`${service}: ${problem.status} ${problem.code}${problem.detail ? `: ${problem.detail}` : ''}`);
    this.name = 'ApiError';
    this.service = service;
    this.problem = problem;
  }
  get status(): number {
    return this.problem.status;
  }
}

export function isApiError(err: unknown): err is ApiError {
  return err instanceof ApiError;
}

/** Reads an error body into a problem, whatever the service sent. */
export function problemOf(status: number, contentType: string, text: string): ApiProblem {
  if (/json/i.test(contentType)) {
    try {
      const p = JSON.parse(text) as Record<string, unknown>;
      if (p && typeof p === 'object' && !Array.isArray(p)) {
        // OAuth endpoints answer {error, error_description} (RFC 6749 §5.2).
        const code = typeof p.code === 'string' ? p.code : typeof p.error === 'string' ? p.error : `http_${status}`;
        const title = typeof p.title === 'string' ? p.title : code;
        const detail = typeof p.detail === 'string' ? p.detail : typeof p.error_description === 'string' ? p.error_description : undefined;
        return { ...p, title, status, code, ...(detail === undefined ? {} : { detail }) };
      }
    } catch {
      // not JSON after all: below
    }
  }
  return { title: `HTTP ${status}`, status, code: `http_${status}`, detail: text.slice(0, 200) || undefined };
}
