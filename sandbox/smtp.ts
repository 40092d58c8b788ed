/**
 * The sandbox's SMTP listener: nodemailer's `smtp-server`, set up as a plain provider stand-in,
 * with the sandbox's decisions in two hooks, one per RCPT TO and one per received message.
 *
 * What a client sees: EHLO offers PIPELINING, 8BITMIME, SMTPUTF8 and AUTH PLAIN LOGIN (optional,
 * any credentials accepted); no STARTTLS (the command is refused), no SIZE, DSN or enhanced status
 * codes. Commands are answered one at a time, in order, so a slow answer to DATA holds the next
 * command as a real server would. A message over `maxBytes` is refused after DATA.
 */
import type { Socket } from 'node:net';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { Logger } from '../shared/log.js';

/** An SMTP reply: code and text. */
export interface SmtpReply {
  code: number;
  text: string;
  /** Close the connection after this reply (a 421 always does). */
  close?: boolean;
}

export interface SmtpHooks {
  /** Decides on one RCPT TO; `undefined` accepts it. */
  recipient(address: string): SmtpReply | undefined;
  /** Handles a complete message (may wait: that is how latency and timeouts are injected). */
  message(envelope: { from: string; to: string[] }, data: Buffer): Promise<SmtpReply>;
}

export interface SmtpServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  hooks: SmtpHooks;
  log: Logger;
  /** Largest message accepted, bytes (default 10 MiB). */
  maxBytes?: number;
  /** The name in the greeting. */
  hostname?: string;
}

export interface SmtpServer {
  readonly port: number;
  /** Stops accepting, and destroys open connections. */
  close(): Promise<void>;
}

const DEFAULT_MAX = 10 * 1024 * 1024;
// RFC 5321 §4.5.3.2.7: a server waits at least 5 minutes for the client's next command.
// smtp-server does not count time spent waiting for our own hooks (latency, held answers).
const IDLE_TIMEOUT_MS = 5 * 60_000;

const TOO_BIG: SmtpReply = { code: 552, text: '5.3.4 Message size exceeds fixed limit' };
const LOCAL_ERROR: SmtpReply = { code: 451, text: '4.3.0 Local error in processing', close: true };

const smtpError = (r: SmtpReply): Error & { responseCode: number } => Object.assign(new Error(r.text), { responseCode: r.code });

export async function startSmtpServer(opts: SmtpServerOptions): Promise<SmtpServer> {
  const max = opts.maxBytes ?? DEFAULT_MAX;
  const { hooks, log } = opts;

  const server: SMTPServer = new SMTPServer({
    name: opts.hostname ?? 'sandbox',
    banner: 'sandbox ready',
    // smtp-server would log addresses and commands; the sandbox logs no address.
    logger: false,
    disabledCommands: ['STARTTLS'],
    authMethods: ['PLAIN', 'LOGIN'],
    // AUTH is offered but not required (so a client is never cut off for not authenticating).
    authOptional: true,
    allowInsecureAuth: true,
    disableReverseLookup: true,
    socketTimeout: IDLE_TIMEOUT_MS,
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username || 'anonymous' });
    },
    onRcptTo(address, _session, callback) {
      const refused = hooks.recipient(address.address);
      callback(refused ? smtpError(refused) : null);
    },
    onData(stream, session, callback) {
      const envelope = {
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        to: session.envelope.rcptTo.map((r) => r.address),
      };
      const chunks: Buffer[] = [];
      let bytes = 0;
      const answer = (r: SmtpReply): void => {
        if (r.code < 400) callback(null, r.text);
        else callback(smtpError(r));
        if (r.close && r.code !== 421) closeSession(session);
      };
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes <= max) chunks.push(chunk);
      });
      // The client went away in the middle of the message: there is no one to answer.
      stream.on('error', () => {});
      stream.on('end', () => {
        if (bytes > max) return answer(TOO_BIG);
        hooks.message(envelope, Buffer.concat(chunks)).then(answer, (err: unknown) => {
          log.error({ err }, 'smtp message handling failed');
          answer(LOCAL_ERROR);
        });
      });
    },
  });

  const closeSession = (session: SMTPServerSession): void => {
    for (const c of server.connections) if (c.session === session) c.close();
  };

  // Shutdown destroys open connections at once (smtp-server would wait for them up to 30 s).
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // A client that resets its connection (one that gave up on a held answer) is routine.
  server.on('error', (err: Error & { code?: string }) => log.debug({ code: err.code, msg: err.message }, 'smtp connection error'));

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
