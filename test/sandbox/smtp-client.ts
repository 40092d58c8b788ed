/** A scripted SMTP client for the sandbox tests: one reply per command, and when the server hangs up. */
import { connect } from 'node:net';

export interface SmtpClient {
  /** The 220 greeting. */
  readonly greeting: string;
  /** Writes one command (or a whole DATA body ending in a lone dot) and waits for its reply. */
  send(unit: string): Promise<string>;
  /** Resolves when the server has closed the connection. */
  readonly closed: Promise<void>;
  isClosed(): boolean;
  end(): void;
}

export async function smtpConnect(port: number): Promise<SmtpClient> {
  const socket = connect(port, '127.0.0.1');
  socket.setEncoding('utf8');
  let buf = '';
  const replies: string[] = [];
  let waiter: { resolve: (r: string) => void; reject: (e: Error) => void } | undefined;
  let closed = false;
  const closedP = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  void closedP.then(() => {
    closed = true;
    waiter?.reject(new Error('connection closed'));
  });
  socket.on('error', () => {});
  socket.on('data', (d: string) => {
    buf += d;
    // A reply is any "NNN-" lines followed by one "NNN " (or bare "NNN") line.
    let m: RegExpExecArray | null;
    while ((m = /^((?:\d{3}-[^\n]*\n)*\d{3}(?: [^\n]*)?\r?\n)/.exec(buf))) {
      replies.push(m[1]!.trim());
      buf = buf.slice(m[1]!.length);
    }
    if (waiter && replies.length > 0) {
      const w = waiter;
      waiter = undefined;
      w.resolve(replies.shift()!);
    }
  });
  const next = (): Promise<string> => {
    if (replies.length > 0) return Promise.resolve(replies.shift()!);
    if (closed) return Promise.reject(new Error('connection closed'));
    return new Promise((resolve, reject) => (waiter = { resolve, reject }));
  };
  const greeting = await next();
  return {
    greeting,
    send: (unit) => {
      socket.write(unit + '\r\n');
      return next();
    },
    closed: closedP,
    isClosed: () => closed,
    end: () => socket.destroy(),
  };
}

/** A DATA body: header and body lines, CRLF-joined, ending in the lone dot. */
export const dataBody = (lines: string[]): string => [...lines, '.'].join('\r\n');

/** EHLO, MAIL FROM, one RCPT TO per address (each must be accepted), DATA. */
export async function openTransaction(c: SmtpClient, from: string, to: string[]): Promise<void> {
  for (const cmd of ['EHLO client.test', `MAIL FROM:<${from}>`, ...to.map((a) => `RCPT TO:<${a}>`), 'DATA']) {
    const r = await c.send(cmd);
    if (!/^(250|354)[ -]/.test(r)) throw new Error(`${cmd} → ${r}`);
  }
}
